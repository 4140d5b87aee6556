"""Geometry derived from tensor expressions: axes, affine accesses, reducers, refusals."""

import pytest

tvm = pytest.importorskip("tvm")
from tvm import te

from tuner.errors import InvalidWorkloadError
from tuner.expr.expr import AxisKind, Reducer
from tuner.expr.parse import (
    describe,
    prim_func_from_script,
    prim_func_from_tensors,
    script_text,
)


def _conv1d(stride: int, dil: int):
    data = te.placeholder((1, 8, 64), name="data")
    weight = te.placeholder((16, 8, 3), name="weight")
    rc, rs = te.reduce_axis((0, 8), name="rc"), te.reduce_axis((0, 3), name="rs")
    ow = (64 - (3 - 1) * dil - 1) // stride + 1
    out = te.compute((1, 16, ow), lambda b, f, x: te.sum(data[b, rc, x * stride + rs * dil] * weight[f, rc, rs],
                                                         axis=[rc, rs]), name="c1")
    return describe(prim_func_from_tensors([data, weight, out]))


def test_strides_and_dilation_are_coefficients():
    e = _conv1d(stride=2, dil=3)
    assert [a.name for a in e.spatial] == ["b", "f", "x"] and [a.name for a in e.reduce] == ["rc", "rs"]
    assert all(a.kind is AxisKind.REDUCE for a in e.reduce)
    data = e.inputs[0]
    assert data.tensor == "data" and data.shape == (1, 8, 64)
    assert data.dims[2].coef("x") == 2 and data.dims[2].coef("rs") == 3 and data.dims[2].coef("f") == 0
    assert e.inputs[1].axes == {"f", "rc", "rs"} and "f" not in data.axes
    assert e.reducer is Reducer.SUM and e.ops_per_point == 2
    assert e.flops == 2 * 16 * e.spatial[2].extent * 8 * 3


def test_stencil_halo_is_a_span_and_ops_are_counted():
    x = te.placeholder((10, 12), name="X")
    y = te.compute((8, 10),
                   lambda i, j: x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2] - x[i + 1, j + 1],
                   name="st")
    e = describe(prim_func_from_tensors([x, y]))
    assert e.reducer is Reducer.NONE and not e.reduce
    assert [(d.offset, d.span) for d in e.inputs[0].dims] == [(0, 3), (0, 3)]
    assert e.ops_per_point == 4


def test_max_reduction_and_negative_coefficient():
    a = te.placeholder((16, 20), name="A")
    r = te.reduce_axis((0, 4), name="r")
    m = te.compute((13, 10), lambda i, j: te.max(a[i + r, 19 - 2 * j], axis=r), name="m")
    e = describe(prim_func_from_tensors([a, m]))
    assert e.reducer is Reducer.MAX
    assert e.inputs[0].dims[1].coef("j") == -2 and e.inputs[0].dims[1].offset == 19


def test_script_round_trip_describes_the_same():
    a = te.placeholder((32, 16), name="A")
    b = te.placeholder((16, 8), name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((32, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="mm")
    text = script_text(prim_func_from_tensors([a, b, c]))
    again = prim_func_from_script(script_text(prim_func_from_script(text)))
    assert describe(prim_func_from_script(text)) == describe(again)
    assert script_text(prim_func_from_script(text)) == text


def test_non_affine_index_and_two_stages_are_refused():
    a = te.placeholder((64,), name="A")
    sq = te.compute((8,), lambda i: a[i * i], name="sq")
    with pytest.raises(InvalidWorkloadError, match="affine"):
        describe(prim_func_from_tensors([a, sq]))
    b = te.compute((64,), lambda i: a[i] * 2.0, name="b")
    c = te.compute((64,), lambda i: b[i] + 1.0, name="c")
    with pytest.raises(InvalidWorkloadError, match="one te.compute stage"):
        describe(prim_func_from_tensors([a, c]))


def test_a_reduction_to_a_scalar_is_refused():
    a = te.placeholder((64,), name="A")
    k = te.reduce_axis((0, 64), name="k")
    total = te.compute((), lambda: te.sum(a[k], axis=k), name="total")
    with pytest.raises(InvalidWorkloadError, match="no spatial axis"):
        describe(prim_func_from_tensors([a, total]))


def _body(fn, shape=(8, 8)):
    x = te.placeholder(shape, name="X")
    y = te.compute(shape, lambda i, j: fn(x[i, j]), name="Y")
    return describe(prim_func_from_tensors([x, y]))


def test_instructions_per_point_follow_the_generated_code():
    a, b = te.placeholder((8, 6), name="A"), te.placeholder((6, 8), name="B")
    r = te.reduce_axis((0, 6), name="r")
    fma = te.compute((8, 8), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="gemm")
    tropical = te.compute((8, 8), lambda i, j: te.max(a[i, r] + b[r, j], axis=r), name="maxplus")
    e_fma, e_max = (describe(prim_func_from_tensors([a, b, c])) for c in (fma, tropical))
    assert (e_fma.instructions_per_point, e_fma.block_reason, e_fma.scalar_reason) == (1, "", "")
    assert e_max.instructions_per_point == 3 and "micro-kernel" in e_max.block_reason  # add + compare + select
    assert _body(lambda v: te.sqrt(v) * 2.0).scalar_reason == ""  # sqrt has a vector instruction
    exp = _body(lambda v: te.exp(v))
    assert "exp has no vector instruction" in exp.scalar_reason and exp.instructions_per_point == 20


def test_unsupported_math_function_is_refused_by_name():
    with pytest.raises(InvalidWorkloadError, match="unsupported call sigmoid.*exp, exp2"):
        _body(lambda v: te.sigmoid(v))
