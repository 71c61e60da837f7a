"""The conformance table as Markdown, written into its marked place in ``docs/conformance.md``."""

import re

__all__ = ["BEGIN", "END", "markdown", "update_page"]

BEGIN = "<!-- conformance table: written by make conformance -->"
END = "<!-- end of the conformance table -->"


def cell(row):
    """One library/PE-count cell: ``5/5``, or what went wrong (``3 wrong``, ``1 hang``, ``2 races``)."""
    if row is None:
        return "–"
    bad = [f"{row[k]} {word}" for k, word in (("wrong", "wrong"), ("hangs", "hang"), ("races", "race")) if row[k]]
    text = ", ".join(bad) + f" of {row['runs']}" if bad else f"{row['runs']}/{row['runs']}"
    return f"{text} (refused: {row['refused']})" if row["refused"] else text


def markdown(results):
    """The summary and the table (program x library x PE count) of ``results`` (results.json)."""
    rows = results["rows"]
    columns = list(dict.fromkeys((r["library"], r["npes"]) for r in rows))
    programs = list(dict.fromkeys((r["area"], r["program"]) for r in rows))
    at = {(r["program"], r["library"], r["npes"]): r for r in rows}
    runs = sum(r["runs"] for r in rows)
    totals = {k: sum(r[k] for r in rows) for k in ("wrong", "hangs", "races")}
    seconds = ", ".join(f"{k} {v} s" for k, v in results["seconds"].items())
    lines = [
        f"Measured {results['date']} at commit {results['commit']} on {results['machine']}: "
        f"{len(programs)} programs, {results['repeat']} repetitions each, {results['load']} busy loops beside; "
        f"{runs} runs: **{totals['wrong']} wrong, {totals['hangs']} hangs or PE deaths, "
        f"{totals['races']} with a race report** "
        f"(time: {seconds}).",
        "",
    ]
    bad = [r for r in rows if r["wrong"] or r["hangs"] or r["races"]]
    if bad:
        lines += ["Not right every time:", ""]
        lines += [f"- {r['problems'][0]}" for r in bad]
        lines.append("")
    lines += [
        "| area | program | " + " | ".join(f"{lib} {n} PEs" for lib, n in columns) + " |",
        "| --- | --- | " + " | ".join("---" for _ in columns) + " |",
    ]
    for area, name in programs:
        cells = [cell(at.get((name, lib, n))) for lib, n in columns]
        lines.append(f"| {area} | `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def update_page(path, results):
    """Replace the text between :data:`BEGIN` and :data:`END` in the page at ``path``."""
    text = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no conformance table markers; put {BEGIN} and {END} where it goes")
    new = f"{BEGIN}\n\n{markdown(results)}\n\n{END}"
    path.write_text(pattern.sub(lambda _: new, text))
