"""Array declarations and sizes: pure parsing, no OpenSHMEM."""

import pytest

from shmem_notebook.specs import (
    SpecError,
    as_specs,
    format_size,
    parse_size,
    parse_spec,
    parse_specs,
    split_declarations,
)


@pytest.mark.parametrize(
    "text, npes, shape, dtype",
    [
        ("A=int64[8]", 4, (8,), "int64"),
        ("flags=int32[npes]", 4, (4,), "int32"),
        ("grid=float64[64,64]", 2, (64, 64), "float64"),
        ("halo=float64[2,npes*4]", 3, (2, 12), "float64"),
        (" x = uint8 [ (npes+1)//2 ] ", 5, (3,), "uint8"),
        ("z=complex128[npes-1]", 1, (0,), "complex128"),
        ("b=bool[2**3]", 1, (8,), "bool"),
    ],
)
def test_valid_declarations(text, npes, shape, dtype):
    spec = parse_spec(text)
    assert spec.shape(npes) == shape
    assert spec.dtype == dtype
    assert parse_spec(str(spec)) == spec


def test_nbytes():
    assert parse_spec("A=float64[npes,8]").nbytes(4) == 4 * 8 * 8


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("A", "expected NAME=DTYPE[SHAPE]"),
        ("A=int64", "expected NAME=DTYPE[SHAPE]"),
        ("A=int64[]", "empty dimension"),
        ("A=int64[8,]", "empty dimension"),
        ("A=foo[8]", "unknown dtype 'foo'"),
        ("A=object[8]", "not numeric"),
        ("A=int64[x]", "unsupported shape term 'x'"),
        ("A=int64[__import__('os')]", "expected NAME=DTYPE[SHAPE]"),
        ("A=int64[8.5]", "unsupported shape term"),
        ("1A=int64[8]", "expected NAME=DTYPE[SHAPE]"),
        ("me=int64[8]", "reserved"),
        ("for=int64[8]", "reserved"),
    ],
)
def test_malformed_declarations_show_the_grammar(text, fragment):
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_negative_dimension_is_reported_with_npes():
    spec = parse_spec("A=int64[npes-3]")
    with pytest.raises(SpecError, match="negative dimension at npes=2"):
        spec.shape(2)


def test_duplicate_names_on_one_line():
    with pytest.raises(SpecError, match="declared twice"):
        parse_specs(["A=int64[8]", "A=int32[4]"])


@pytest.mark.parametrize(
    "text, nbytes", [("256M", 256 << 20), ("1G", 1 << 30), ("65536", 65536), ("512KiB", 512 << 10), ("1.5g", 3 << 29)]
)
def test_sizes(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "big", "12X", "-1M"])
def test_bad_sizes(text):
    with pytest.raises(SpecError, match="e.g. 256M or 1G"):
        parse_size(text)


def test_format_size():
    assert format_size(80) == "80 B"
    assert format_size(256 << 20) == "256.0 MiB"


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("E=int64[8] F=float32[npes]",), {}),
        ((["E=int64[8]", "F=float32[npes]"],), {}),
        (({"E": "int64[8]", "F": "float32[npes]"},), {}),
        ((), {"E": "int64[8]", "F": "float32[npes]"}),
        (("E=int64[8]",), {"F": "float32[npes]"}),
        ((("E=int64[8]", parse_spec("F=float32[npes]")),), {}),
        ((None, "E=int64[8]\n  F=float32[ npes ]"), {}),
    ],
)
def test_every_form_of_declarations(args, kwargs):
    specs = as_specs(*args, **kwargs)
    assert [str(s) for s in specs] == ["E=int64[8]", "F=float32[npes]"]


def test_spaces_inside_a_shape_stay_in_one_declaration():
    assert split_declarations("A=int64[2, npes]  B=int8[3]") == ["A=int64[2, npes]", "B=int8[3]"]
    assert [s.shape(4) for s in as_specs("A=int64[2, npes] B=int8[3]")] == [(2, 4), (3,)]


@pytest.mark.parametrize(
    "args, kwargs, fragment",
    [
        ((42,), {}, "cannot read array declarations from 42 (a int)"),
        (({"A": 8},), {}, "cannot read array declaration 'A': 8"),
        (({"A": parse_spec("B=int64[2]")},), {}, "names another array ('B')"),
        (("A=int64[8]",), {"A": "int32[2]"}, "declared twice"),
        (("A=int64[8] oops",), {}, "cannot read array declaration 'oops'"),
    ],
)
def test_bad_declarations_say_which_forms_work(args, kwargs, fragment):
    with pytest.raises(SpecError) as info:
        as_specs(*args, **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_negative_dimension_names_npes_once():
    with pytest.raises(SpecError) as info:
        parse_spec("B=int64[npes-5]").shape(2)
    assert str(info.value).count("npes=2") == 1


def test_division_by_zero_in_a_shape_is_a_spec_error():
    with pytest.raises(SpecError, match="divides by zero at npes=2"):
        parse_spec("B=int64[8//(npes-2)]").shape(2)
