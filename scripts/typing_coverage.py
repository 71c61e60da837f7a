"""How typed the package is: fully annotated functions per folder, and what mypy's strict override covers.

A function is fully annotated when every parameter (but a method's ``self`` / ``cls``) and its return are
annotated; nested functions count, lambdas do not. A strict module is one named (or matched by ``.*``) in
the ``pyproject.toml`` override that sets ``disallow_untyped_defs``. ``python scripts/typing_coverage.py``.
"""

import ast
import fnmatch
import pathlib
import tomllib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shmem_notebook"


def annotated(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    """Whether every parameter but a method's first and the return are annotated."""
    a = fn.args
    params = [*a.posonlyargs, *a.args]
    if method and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    params += [*a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
    return fn.returns is not None and all(p.annotation is not None for p in params)


def functions(tree: ast.AST) -> list[bool]:
    """One flag per function in the tree: fully annotated or not."""
    flags = []

    def walk(node: ast.AST, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                flags.append(annotated(child, in_class))
            walk(child, isinstance(child, ast.ClassDef))

    walk(tree, False)
    return flags


def strict_patterns() -> list[str]:
    """The module patterns of pyproject.toml's strict mypy override(s)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    overrides = config["tool"]["mypy"].get("overrides", [])
    found = [o["module"] for o in overrides if o.get("disallow_untyped_defs")]
    return [m for mods in found for m in ([mods] if isinstance(mods, str) else mods)]


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def main() -> None:
    patterns = strict_patterns()
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # typed, functions, lines, strict lines, modules
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = str(path.parent.relative_to(ROOT))
        flags = functions(ast.parse(path.read_text(), str(path)))
        lines = len(path.read_text().splitlines())
        strict = any(fnmatch.fnmatchcase(module_name(path), p) for p in patterns)
        row = rows[folder]
        row[0] += sum(flags)
        row[1] += len(flags)
        row[2] += lines
        row[3] += lines if strict else 0
        row[4] += strict
    print(f"{'folder':<32} {'annotated':>9} {'functions':>9} {'%':>5} {'strict modules':>14} {'strict lines':>15}")
    for folder, (typed, total, lines, strict_lines, strict) in [*sorted(rows.items()), ("total", _sum(rows))]:
        share = 100 * typed / total if total else 100.0
        print(
            f"{folder:<32} {typed:>9} {total:>9} {share:>5.1f} {strict:>14} {strict_lines:>7} / {lines}"
            + (f"  ({100 * strict_lines / lines:.0f}% of the lines strict)" if folder == "total" else "")
        )
    print(f"strict override: {len(patterns)} entries: {', '.join(patterns)}")


def _sum(rows: dict[str, list[int]]) -> list[int]:
    return [sum(col) for col in zip(*rows.values())]


if __name__ == "__main__":
    main()
