"""Expression spaces: built-in operators written as expressions analyse and simulate as the built-in path."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

tvm = pytest.importorskip("tvm")
from tvm import te

from tuner.expr.workload import ExprWorkload
from tuner.measure.simulator import simulate
from tuner.search.features import features
from tuner.space.expr_space import ExprSpace
from tuner.space.space import ScheduleSpace
from tuner.workloads import BatchMatmul, Conv2d, Dense


def dense_expr(m, n, k):
    a, w = te.placeholder((m, k), name="data"), te.placeholder((n, k), name="weight")
    rk = te.reduce_axis((0, k), name="k")
    return [a, w, te.compute((m, n), lambda m, n: te.sum(a[m, rk] * w[n, rk], axis=rk), name="dense")]


def bmm_expr(b, m, n, k):
    x, y = te.placeholder((b, m, k), name="A"), te.placeholder((b, n, k), name="B")
    rk = te.reduce_axis((0, k), name="k")
    return [x, y, te.compute((b, m, n), lambda b, m, n: te.sum(x[b, m, rk] * y[b, n, rk], axis=rk), name="bmm")]


def conv_expr(n, c, h, w, k, r, s, stride, dil=1):
    # the built-in conv's data layout [N, G, C/G, H, W] with G = 1 (the unit G dimension keeps a
    # strided DMA descriptor from spanning images: with n > 1 a 4-D data tensor would need fewer)
    x, wt = te.placeholder((n, 1, c, h, w), name="data"), te.placeholder((k, c, r, s), name="weight")
    rc, rr, rs = (te.reduce_axis((0, e), name=nm) for e, nm in ((c, "c"), (r, "r"), (s, "s")))
    oh, ow = (h - dil * (r - 1) - 1) // stride + 1, (w - dil * (s - 1) - 1) // stride + 1
    out = te.compute((n, k, oh, ow), lambda n, k, oh, ow: te.sum(
        x[n, 0, rc, oh * stride + rr * dil, ow * stride + rs * dil] * wt[k, rc, rr, rs], axis=[rc, rr, rs]),
        name="conv")
    return [x, wt, out]


# The expression's axes are named like the built-in knobs (lambda argument names become axis names).
CASES = [
    (Dense(m=96, n=200, k=300), lambda: dense_expr(96, 200, 300)),
    (BatchMatmul(b=6, m=40, n=72, k=50), lambda: bmm_expr(6, 40, 72, 50)),
    (Conv2d(n=1, c=24, h=30, w=30, k=40, r=3, s=3, stride_h=2, stride_w=2),
     lambda: conv_expr(1, 24, 30, 30, 40, 3, 3, 2)),
    (Conv2d(n=2, c=16, h=21, w=21, k=24, r=3, s=3, stride_h=2, stride_w=2, dil_h=2, dil_w=2),
     lambda: conv_expr(2, 16, 21, 21, 24, 3, 3, 2, 2)),
]


def _arrays(a, prefix=""):
    """Every per-config figure of an Analysis (nested plans flattened)."""
    out = {}
    for f in dataclasses.fields(a):
        value = getattr(a, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_arrays(value, f"{prefix}{f.name}."))
        elif isinstance(value, np.ndarray):
            out[prefix + f.name] = value
    return out


@pytest.mark.parametrize("builtin,make", CASES, ids=["dense", "batch_matmul", "conv2d", "conv2d_strided_dilated"])
def test_builtin_ops_as_expressions_match_the_builtin_path(builtin, make):
    """A built-in op through its spec (tuner/space/gemm.py, conv2d.py) and the same op written as an
    expression through the generic path: every analysis figure and the simulated time (to rounding: a
    conv expression orders its output axes n, k, oh, ow, the built-in n, oh, ow, k, so products of
    ragged tiles' mean extents round differently), validity and failure reasons exactly; and the
    cost-model features, which know an operator by its geometry, never by its name."""
    old = ScheduleSpace(builtin, "sw26010")
    new = ExprSpace(ExprWorkload.from_tensors(make()), "sw26010")
    assert {a.name: a.role for a in new.geometry.axes} == {a.name: a.role for a in old.geometry.axes}
    rng = np.random.default_rng(1)
    rows = rng.integers(0, old.sizes, size=(3000, len(old.sizes)))
    configs = [old.decode(r) for r in rows]
    new_rows = np.stack([new.encode(c) for c in configs])
    a_old, a_new = old.analyze(rows), new.analyze(new_rows)
    assert a_old.valid.mean() > 0.02  # the comparison covers valid configs, not only failures
    want, got = _arrays(a_old), _arrays(a_new)
    assert set(got) == set(want) and len(want) > 60
    for f in want:
        np.testing.assert_allclose(got[f], want[f], rtol=1e-13, atol=0, err_msg=f)
    np.testing.assert_array_equal(a_new.reason, a_old.reason)
    np.testing.assert_allclose(simulate(new, new_rows), simulate(old, rows), rtol=1e-13)
    np.testing.assert_allclose(features(new, new_rows), features(old, rows), rtol=1e-6, atol=0)


def test_sampling_features_and_baseline_work_on_a_three_operand_op():
    a, b, w = te.placeholder((128, 96), name="A"), te.placeholder((96, 80), name="B"), te.placeholder((96,), name="w")
    rk = te.reduce_axis((0, 96), name="rk")
    c = te.compute((128, 80), lambda i, j: te.sum(a[i, rk] * b[rk, j] * w[rk], axis=rk), name="wg")
    space = ExprSpace(ExprWorkload.from_tensors([a, b, w, c]), "sw26010-pro")
    assert [(o.access.tensor, o.group) for o in space.geometry.operands] == [("A", "a"), ("B", "b"), ("w", "a")]
    idx = space.sample(500, 0)
    assert len(idx) == 500 and space.analyze(idx).valid.all()
    an = space.analyze(idx)
    # group a is A plus w: its LDM is the sum of both boxes
    tk = np.array([space.decode(r)["tile_rk"] for r in idx])
    ti = np.array([space.decode(r)["tile_i"] for r in idx])
    np.testing.assert_allclose(an.a.ldm_bytes, 4 * (np.minimum(ti, 128) * np.minimum(tk, 96) + np.minimum(tk, 96)))
    feats = features(space, idx)
    assert feats.shape[0] == 500 and np.isfinite(feats).all()
    assert np.isfinite(simulate(space, idx)).all()


def test_single_operand_stencil_has_an_empty_group_and_no_reduction():
    x = te.placeholder((34, 66), name="X")
    y = te.compute((32, 64), lambda i, j: x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2], name="st")
    space = ExprSpace(ExprWorkload.from_tensors([x, y]), "sw26010")
    geo = space.geometry
    assert (geo.row_axes, geo.col_axes, geo.red_axis.extent) == (("i",), ("j",), 1)
    assert [o.group for o in geo.operands] == ["b"] and "_r" not in space.knobs[space.knob_index["inner"]].choices
    idx = space.sample(300, 2)
    an = space.analyze(idx)
    assert an.valid.all() and (an.a.requests == 0).all() and (an.a.ldm_bytes == 0).all()
    cfg = [space.decode(r) for r in idx]
    ti = np.array([c["tile_i"] for c in cfg])
    tj = np.array([c["tile_j"] for c in cfg])
    # the halo: a (ti x tj) tile needs (ti+2) x (tj+2) input elements, clipped to the tensor
    np.testing.assert_allclose(an.b.ldm_bytes, 4 * np.minimum(ti + 2, 34) * np.minimum(tj + 2, 66))
    assert np.isfinite(simulate(space, idx)).all()


@settings(max_examples=300, deadline=None)
@given(low=st.integers(-20, 20), step=st.integers(1, 16), span=st.integers(1, 40), extent=st.integers(1, 80),
       count=st.integers(1, 12))
def test_the_closed_form_sum_of_clipped_boxes_is_the_sum(low, step, span, extent, count):
    from tuner.space.expr_geometry import _sum_of_boxes

    brute = sum(min(low + i * step + span, extent) - max(low + i * step, 0) for i in range(count))
    got = _sum_of_boxes(np.array([low], float), np.array([step], float), np.array([span], float), extent,
                        np.array([count], float))
    assert got[0] == brute
