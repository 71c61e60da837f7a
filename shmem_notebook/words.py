"""Counts in words: ``plural(1, "step")`` -> ``'1 step'``, ``plural(2, "step")`` -> ``'2 steps'``.

The one place messages pluralise (plain definitions, no dependencies; both sides use it).
"""

__all__ = ["plural"]


def plural(count: int | float | str, word: str, many: str | None = None, number: bool = True) -> str:
    """``count`` and ``word``, the word in the plural unless ``count`` is 1; ``many``: an irregular
    plural (``plural(2, "differs", "differ")``); ``number=False``: the word alone (``seeds 3, 4``).
    Counts of 1,000 or more get thousands separators."""
    said = word if count == 1 else many or word + "s"
    if not number:
        return said
    return f"{count:,} {said}" if isinstance(count, int) else f"{count} {said}"
