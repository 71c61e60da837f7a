"""Symmetric array declarations (``NAME=DTYPE[SHAPE]``) and heap sizes (``256M``).

Pure parsing: nothing here touches OpenSHMEM, so the client can check every
declaration before any PE sees it.
"""

import ast
import keyword
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError

__all__ = [
    "ArraySpec",
    "SpecError",
    "parse_spec",
    "parse_specs",
    "as_specs",
    "split_declarations",
    "parse_size",
    "format_size",
    "check_heap",
    "MIN_HEAP",
]

GRAMMAR = (
    "NAME=DTYPE[SHAPE], where DTYPE is a NumPy dtype name and SHAPE a comma list of "
    "ints or expressions of npes, e.g. A=int64[8] flags=int32[npes] halo=float64[2,npes*4]"
)

_SPEC = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([A-Za-z_]\w*)\s*\[(.*)\]\s*$")
_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
# names a declaration must not shadow in the PE namespace
RESERVED = frozenset({"shmem", "np", "me", "npes"})


def _eval_dim(node: ast.expr, npes: int) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and node.id == "npes":
        return npes
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval_dim(node.left, npes), _eval_dim(node.right, npes))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_dim(node.operand, npes)
    raise SpecError(f"unsupported shape term {ast.unparse(node)!r}")


@dataclass(frozen=True)
class ArraySpec:
    """A symmetric array declaration: name, dtype and shape (as written)."""

    name: str
    dtype: str
    dims: tuple[str, ...]  # each an int expression of npes, as text

    def shape(self, npes: int) -> tuple[int, ...]:
        """The concrete shape for a job of ``npes`` PEs."""
        try:
            shape = tuple(_eval_dim(ast.parse(d, mode="eval").body, npes) for d in self.dims)
        except ZeroDivisionError:
            raise SpecError(f"{self}: its shape divides by zero at npes={npes}") from None
        if any(n < 0 for n in shape):
            raise SpecError(f"{self}: shape {shape} has a negative dimension at npes={npes}")
        return shape

    def nbytes(self, npes: int) -> int:
        """Bytes one PE needs for this array."""
        return int(np.prod(self.shape(npes), dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.name}={self.dtype}[{','.join(self.dims)}]"


def parse_spec(text: str) -> ArraySpec:
    """Parse one ``NAME=DTYPE[SHAPE]`` declaration into an :class:`ArraySpec`."""
    match = _SPEC.match(text)
    if not match:
        raise SpecError(f"cannot read array declaration {text!r}: expected {GRAMMAR}")
    name, dtype, body = match.groups()
    if keyword.iskeyword(name) or name in RESERVED:
        raise SpecError(f"{name!r} is reserved in a PE's namespace; choose another array name")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise SpecError(f"unknown dtype {dtype!r} in {text!r}: expected {GRAMMAR}") from None
    if dt.kind not in "biufc":
        raise SpecError(f"dtype {dtype!r} in {text!r} is not numeric; use e.g. int64, float64, bool")
    dims = tuple(d.strip() for d in body.split(",")) if body.strip() else ()
    if not dims or any(not d for d in dims):
        raise SpecError(f"empty dimension in {text!r}: expected {GRAMMAR}")
    try:  # syntax only: the sign of a dimension depends on npes, checked by shape()
        for d in dims:
            _eval_dim(ast.parse(d, mode="eval").body, 1)
    except (SyntaxError, SpecError) as exc:
        raise SpecError(f"bad shape in {text!r} ({exc}): expected {GRAMMAR}") from None
    return ArraySpec(name, dt.name, dims)


def parse_specs(tokens: Iterable[str]) -> list[ArraySpec]:
    """Parse several declarations; a name declared twice is an error."""
    specs = [parse_spec(t) for t in tokens]
    names = [s.name for s in specs]
    for name in set(names):
        if names.count(name) > 1:
            raise SpecError(f"array {name!r} is declared twice on one line; declare each name once")
    return specs


FORMS = (
    "a string with one or more declarations ('A=int64[8] B=float32[npes]'), a list of them, "
    "a dict ({'A': 'int64[8]'}) or keyword arguments (A='int64[8]')"
)


def split_declarations(text: str) -> list[str]:
    """``'A=int64[8] B=float64[2, npes]'`` -> ``['A=int64[8]', 'B=float64[2, npes]']`` (spaces inside [] kept)."""
    tokens: list[str] = []
    current, depth = "", 0
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch.isspace() and depth <= 0:
            if current:
                tokens.append(current)
            current = ""
        else:
            current += ch
    if current:
        tokens.append(current)
    return tokens


def _named(name: Any, value: Any) -> ArraySpec:
    if isinstance(value, ArraySpec):
        if value.name != name:
            raise SpecError(
                f"declaration {name}={value} names another array ({value.name!r}); "
                f"use {name}='{value.dtype}[{','.join(value.dims)}]'"
            )
        return value
    if not isinstance(name, str) or not isinstance(value, str):
        raise SpecError(f"cannot read array declaration {name!r}: {value!r}; expected {FORMS}")
    return parse_spec(f"{name}={value}")


def _collect(item: Any, out: list[ArraySpec]) -> None:
    if item is None:
        return
    if isinstance(item, ArraySpec):
        out.append(item)
    elif isinstance(item, str):
        out.extend(parse_spec(t) for t in split_declarations(item))
    elif isinstance(item, dict):
        out.extend(_named(name, value) for name, value in item.items())
    elif isinstance(item, (list, tuple)):
        for x in item:
            _collect(x, out)
    else:
        raise SpecError(f"cannot read array declarations from {item!r} (a {type(item).__name__}); expected {FORMS}")


def as_specs(*declarations: Any, **named: Any) -> list[ArraySpec]:
    """ArraySpecs from every form a declaration may take; names once each.

    Each positional item is None, an :class:`ArraySpec`, a string with one or
    more declarations (``'A=int64[8] B=float32[npes]'``), a dict
    (``{'A': 'int64[8]'}``) or a list/tuple of these; keyword arguments are
    ``A='int64[8]'``. Every API that takes declarations goes through here.
    """
    specs: list[ArraySpec] = []
    for item in declarations:
        _collect(item, specs)
    _collect(named, specs)
    parse_specs(str(s) for s in specs)  # reject duplicates
    return specs


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str | int | float) -> int:
    """Bytes in a size like ``256M``, ``1G``, ``65536`` or ``512KiB``."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", str(text), re.IGNORECASE)
    if not match:
        raise SpecError(f"cannot read size {text!r}: expected a number with an optional unit, e.g. 256M or 1G")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.upper()])


#: the smallest symmetric heap per PE a job starts with: the tool reserves 256 KiB for the teaching
#: collectives' scratch and a few words for the teams emulation; the rest is for the cell's arrays
MIN_HEAP = 1 << 20


def check_heap(heap: str | int | float) -> int:
    """Bytes of the symmetric heap per PE ``heap`` asks for (a size such as ``"256M"`` or a number
    of bytes), or :class:`SpecError` in one sentence, before anything is launched."""
    if isinstance(heap, bool) or not isinstance(heap, (str, int, float)):
        raise SpecError(f"the heap is a size such as '256M' or '1G', got {heap!r}")
    nbytes = parse_size(heap)
    if nbytes < MIN_HEAP:
        raise SpecError(
            f"a symmetric heap of {heap!r} ({format_size(nbytes)}) per PE is too small: the smallest that works is "
            f"{format_size(MIN_HEAP)} (the tool reserves 256 KiB of it); use e.g. --heap 64M (heap='64M')"
        )
    return nbytes


def format_size(nbytes: float) -> str:
    """A short human size: ``256.0 MiB``."""
    for unit in ("B", "KiB", "MiB"):
        if abs(nbytes) < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"
