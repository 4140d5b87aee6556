"""Gradients derived from expressions (tuner/expr/autodiff.py), rule by rule.

Each case differentiates an operator written with ``te.compute`` and checks every input's gradient
against Richardson-extrapolated central differences in float64 (tuner/codegen/grad_check.py) and,
where torch has the operator, element by element against torch autograd. The derived operators must
be expression workloads like any other (they parse), and strided convolutions must not spend
multiply-adds on inserted zeros.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

te = pytest.importorskip("tvm.te")
torch = pytest.importorskip("torch")
from tvm import tirx  # noqa: E402

from tuner.codegen.grad_check import autograd_errors, fd_errors  # noqa: E402
from tuner.expr.autodiff import differentiate  # noqa: E402
from tuner.expr.derivative import NotDifferentiableError  # noqa: E402

F64 = "float64"


def padded_conv(n=2, c=3, h=9, w=9, k=4, r=3, stride=2, pad=1, dilation=1, groups=1):
    """pad -> conv2d as two te stages; grouped convs index the input channel with k // (K/groups)."""
    x = te.placeholder((n, c, h, w), F64, name="X")
    cg, kg = c // groups, k // groups
    wt = te.placeholder((k, cg, r, r), F64, name="W")
    xp = te.compute((n, c, h + 2 * pad, w + 2 * pad),
                    lambda b, cc, y, z: tirx.if_then_else(tirx.all(y >= pad, y < h + pad, z >= pad, z < w + pad),
                                                          x[b, cc, y - pad, z - pad], tirx.const(0.0, F64)),
                    name="Xp")
    oh = (h + 2 * pad - dilation * (r - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (r - 1) - 1) // stride + 1
    rc, ry, rx = te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")
    out = te.compute((n, k, oh, ow), lambda b, f, y, z: te.sum(
        xp[b, (f // kg) * cg + rc, y * stride + ry * dilation, z * stride + rx * dilation] * wt[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv")
    torch_ref = lambda a, b: torch.nn.functional.conv2d(a, b, stride=stride, padding=pad, dilation=dilation,  # noqa: E731
                                                         groups=groups)
    return [x, wt, out], torch_ref


def check(tensors, reference=None, fd_tol=1e-6, ag_tol=1e-10):
    fd = fd_errors(tensors, seed=3)
    assert max(fd.values()) <= fd_tol, fd
    if reference is not None:
        ag = autograd_errors(tensors, reference, seed=3)
        assert max(ag.values()) <= ag_tol, ag
    return differentiate(tensors)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(stride=1), dict(stride=2), dict(stride=2, r=1, pad=0),
                                dict(stride=1, dilation=2, pad=2), dict(stride=3, h=10, w=10),
                                dict(groups=3, c=3, k=6), dict(groups=2, c=4, k=4, stride=2)],
                         ids=["s1", "s2", "1x1s2", "dilated", "s3", "depthwise", "grouped-s2"])
def test_conv_gradients_match_torch_and_finite_differences(kw):
    tensors, ref = padded_conv(**kw)
    grad = check(tensors, ref)
    for op in grad.operators:
        op.workload()  # every derived operator is an expression workload (one stage, affine indices)


def useful_fraction(grad, wrt, useful):
    executed = sum(op.macs for op in grad.operators if op.wrt == wrt)
    return useful / executed


@pytest.mark.parametrize("r,pad", [(3, 1), (1, 0)])
def test_strided_conv_gradients_spend_no_multiply_add_on_inserted_zeros(r, pad):
    n, c, h, k = 1, 8, 28, 8
    tensors, _ = padded_conv(n=n, c=c, h=h, w=h, k=k, r=r, stride=2, pad=pad)
    grad = differentiate(tensors)
    oh = int(tensors[-1].shape[2])
    # every useful multiply-add of either gradient is one of the forward's (output point, tap) pairs
    # that reads a real (not padding) input element
    xp = np.pad(np.ones((h, h)), pad)
    taps = sum(xp[y * 2 + i, z * 2 + j] for y in range(oh) for z in range(oh) for i in range(r) for j in range(r))
    useful = n * k * c * taps
    assert useful_fraction(grad, "X", useful) >= 0.95
    assert useful_fraction(grad, "W", n * k * c * oh * oh * r * r) == 1.0  # the exact kernel-size output
    # without residue splitting the data gradient would run over every (input point, tap) pair
    assert sum(op.macs for op in grad.operators if op.wrt == "X") < n * c * h * h * k * r * r / 3


def test_stride_two_data_gradient_splits_into_residue_classes():
    tensors, _ = padded_conv(stride=2)
    grad = differentiate(tensors)
    pieces = [op for op in grad.operators if op.wrt == "X"]
    assert sorted(op.residue[2:] for op in pieces) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(op.step[2:] == (2, 2) for op in pieces)
    # each residue reads its own weight taps (W[:, :, 1, 1], W[:, :, 2*j, 1], ...) copied compact first,
    # so that its DMA reads rows, not single elements 9 apart
    from tuner.expr.autodiff import Gather

    assert all(isinstance(op.operands["W"], Gather) for op in pieces)
    assert sorted(op.operands["W"].shape[2:] for op in pieces) == [(), (2,), (2,), (2, 2)]


def test_dense_and_batched_matmul_gradients_are_gemms():
    a = te.placeholder((6, 5), F64, name="A")
    b = te.placeholder((4, 5), F64, name="B")
    k = te.reduce_axis((0, 5), "k")
    out = te.compute((6, 4), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="dense")
    grad = check([a, b, out], lambda x, w: x @ w.T)
    assert {op.name: op.macs for op in grad.operators} == {"dense_grad_A": 120, "dense_grad_B": 120}
    assert all(op.workload().expr.gemm_like for op in grad.operators)


@pytest.mark.parametrize("fn,ref", [
    (lambda x: te.exp(x), torch.exp), (lambda x: te.log(x), torch.log), (lambda x: te.tanh(x), torch.tanh),
    (lambda x: te.erf(x), torch.erf), (lambda x: te.sigmoid(x), torch.sigmoid), (lambda x: te.sqrt(x), torch.sqrt),
    (lambda x: te.power(x, tirx.const(2.5, F64)), lambda x: x ** 2.5),
    (lambda x: tirx.Select(x > 1.0, x * x, -x), lambda x: torch.where(x > 1.0, x * x, -x)),
    (lambda x: tirx.max(x, tirx.const(1.0, F64)), lambda x: torch.clamp(x, min=1.0)),
    (lambda x: tirx.min(x * 2.0, tirx.const(2.5, F64)) / (x + 1.0),
     lambda x: torch.clamp(x * 2.0, max=2.5) / (x + 1.0)),
], ids=["exp", "log", "tanh", "erf", "sigmoid", "sqrt", "pow", "where", "max", "min-div"])
def test_elementwise_rules(fn, ref):
    x = te.placeholder((3, 7), F64, name="X")
    out = te.compute((3, 7), lambda i, j: fn(x[i, j]), name="f")
    grad = check([x, out], ref)
    assert len(grad.operators) == 1


@pytest.mark.slow
def test_max_pool_gradient_goes_through_the_forward_argmax():
    x = te.placeholder((2, 3, 9, 9), F64, name="X")
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    pool = te.compute((2, 3, 4, 4), lambda b, c, y, z: te.max(x[b, c, 2 * y + ry, 2 * z + rx], axis=[ry, rx]),
                      name="pool")
    grad = check([x, pool], lambda t: torch.nn.functional.max_pool2d(t, 3, 2))
    (argmax,) = [op for op in grad.operators if op.name == "pool_argmax"]  # an operator of its own
    assert "pool[" in argmax.formula and all("pool_argmax[" in op.formula for op in grad.operators if op != argmax)


def test_max_pool_ties_give_the_gradient_to_the_first_maximum_as_torch_does():
    """Windows of equal values (a ReLU's zeros, small integers): the equality with the forward result
    holds at several points; the gradient goes to the first (row-major) only, exactly as torch's."""
    from tuner.codegen.grad_check import derived_gradients

    x = te.placeholder((2, 3, 9, 9), F64, name="X")
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    pool = te.compute((2, 3, 4, 4), lambda b, c, y, z: te.max(x[b, c, 2 * y + ry, 2 * z + rx], axis=[ry, rx]),
                      name="pool")
    rng = np.random.default_rng(0)
    data = rng.integers(0, 3, (2, 3, 9, 9)).astype(F64)
    data[0, 0] = 1.0  # whole windows tied
    head = rng.standard_normal((2, 3, 4, 4))
    got = derived_gradients([x, pool], [data], head)["X"]
    t = torch.tensor(data, requires_grad=True)
    (torch.nn.functional.max_pool2d(t, 3, 2) * torch.tensor(head)).sum().backward()
    assert np.array_equal(got, t.grad.numpy())
    assert (got[0, 0] != 0).sum() == 16  # one point per window, not all nine


def test_multi_stage_operator_by_the_chain_rule():
    """conv -> bias + tanh: the epilogue's adjoint is its own operator, the conv's read it."""
    x = te.placeholder((1, 2, 6, 6), F64, name="X")
    w = te.placeholder((3, 2, 3, 3), F64, name="W")
    bias = te.placeholder((3,), F64, name="bias")
    rc, ry, rx = te.reduce_axis((0, 2), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    conv = te.compute((1, 3, 4, 4), lambda b, f, y, z: te.sum(x[b, rc, y + ry, z + rx] * w[f, rc, ry, rx],
                                                              axis=[rc, ry, rx]), name="conv")
    out = te.compute((1, 3, 4, 4), lambda b, f, y, z: te.tanh((conv[b, f, y, z] + bias[f]) * 0.05),
                     name="act")  # scaled so that tanh does not saturate on the check's inputs
    grad = check([x, w, bias, out], lambda a, b, c: torch.tanh(
        (torch.nn.functional.conv2d(a, b) + c[None, :, None, None]) * 0.05))
    names = {op.name for op in grad.operators}
    assert {"act_grad_conv", "act_grad_bias", "act_grad_X_via_conv", "act_grad_W_via_conv"} <= names


def test_stencil_taps_make_one_operator():
    x = te.placeholder((8, 9), F64, name="X")
    out = te.compute((6, 7), lambda i, j: 0.5 * x[i + 1, j + 1] + 0.125 * (x[i, j + 1] + x[i + 2, j + 1]),
                     name="stencil")
    grad = check([x, out])
    assert len(grad.operators) == 1 and grad.operators[0].operands["grad_stencil"].zeros


def test_an_index_that_shares_every_axis_is_refused_with_the_reason():
    x = te.placeholder((5, 5), F64, name="X")
    out = te.compute((5,), lambda i: x[i, i] * 2.0, name="diag")
    with pytest.raises(NotDifferentiableError, match="scatter form"):
        differentiate([x, out])


def test_a_call_without_a_rule_is_refused_by_name():
    x = te.placeholder((5,), F64, name="X")
    out = te.compute((5,), lambda i: te.atan(x[i]), name="f")
    with pytest.raises(NotDifferentiableError, match="atan"):
        differentiate([x, out])


def test_float32_operators_are_checked_in_float64():
    a = te.placeholder((4, 3), "float32", name="A")
    k = te.reduce_axis((0, 3), "k")
    out = te.compute((4,), lambda i: te.sum(a[i, k] * a[i, k] * math.pi, axis=k), name="sq")
    assert max(fd_errors([a, out]).values()) <= 1e-9
    assert differentiate([a, out]).operators[0].workload().dtype == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["max_pool", "conv_weight"])
def test_derived_operators_dma_counts_match_the_analysis(which):
    """A max-pool gradient reads data_pad[2*i + 1] (an offset on a strided tiled axis) and a strided
    conv's weight gradient Xp[y*2 + i] (two tiled axes in one dimension): the analysis' boxes must
    count what the generated kernel's lowered TIR fetches, tile by tile."""
    from tuner.codegen.schedule import build_schedule
    from tuner.codegen.tir_check import compare_with_analysis
    from tuner.space import space_for

    if which == "max_pool":
        x = te.placeholder((1, 3, 9, 9), F64, name="X")
        xp = te.compute((1, 3, 11, 11), lambda b, c, y, z: tirx.if_then_else(
            tirx.all(y >= 1, y < 10, z >= 1, z < 10), x[b, c, y - 1, z - 1], tirx.const(0.0, F64)), name="Xp")
        ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
        out = te.compute((1, 3, 5, 5), lambda b, c, y, z: te.max(xp[b, c, 2 * y + ry, 2 * z + rx], axis=[ry, rx]),
                         name="pool")
        tensors = [x, out]
    else:
        tensors, _ = padded_conv(n=1, c=8, h=12, w=12, k=8, stride=2)
    ops = [op for op in differentiate(tensors).operators if which == "max_pool" or op.wrt == "W"]
    rng = np.random.default_rng(0)
    checked = 0
    for op in ops:
        space = space_for(op.workload(), "sw26010")
        for row in space.sample(12, rng):
            config = space.decode(row)
            assert not compare_with_analysis(build_schedule(space.workload, space.target, config)), (op.name, config)
            checked += 1
    assert checked >= 12


@pytest.mark.slow
def test_a_mixed_radix_index_is_viewed_as_two_dimensions_not_split_by_residue():
    """A grouped conv's input channel g * C_g + c and a non-overlapping pool's 2 * y + r are bijections:
    one operator each, exact multiply-adds."""
    tensors, ref = padded_conv(c=4, k=6, groups=2, stride=2)
    grad = check(tensors, ref)
    assert len([op for op in grad.operators if op.wrt == "X"]) == 4  # the stride's residues only
    assert len([op for op in grad.operators if op.wrt == "W"]) == 1
    x = te.placeholder((1, 2, 8, 8), F64, name="X")
    ry, rx = te.reduce_axis((0, 2), "ry"), te.reduce_axis((0, 2), "rx")
    pool = te.compute((1, 2, 4, 4), lambda b, c, y, z: te.sum(x[b, c, 2 * y + ry, 2 * z + rx] * 0.25, axis=[ry, rx]),
                      name="pool")
    grad = check([x, pool], lambda t: torch.nn.functional.avg_pool2d(t, 2))
    (op,) = grad.operators
    assert op.radix == ((1,), (2,), (4, 2), (4, 2)) and op.macs == 2 * 8 * 8 and "viewed as shape" in grad.describe()


def test_finite_differences_converge_across_the_kinks_of_a_max_reduction():
    """A tropical product max_k A[i,k] + B[k,j] on inputs in [0.5, 1.5] has candidates within the
    largest step of each other: the check shrinks its step until two estimates agree."""
    a = te.placeholder((16, 20), F64, name="A")
    b = te.placeholder((20, 12), F64, name="B")
    k = te.reduce_axis((0, 20), "k")
    out = te.compute((16, 12), lambda i, j: te.max(a[i, k] + b[k, j], axis=k), name="max_plus")
    check([a, b, out], lambda x, y: (x[:, :, None] + y[None]).amax(1))



@pytest.mark.needs("gcc")
def test_conv3d_weight_gradient_with_a_one_point_output_tile_runs_on_the_emulator(tmp_path):
    """A derived operator with four col axes, one of them tiled by 1 on an 8x8 mesh: TVM allocates that
    LDM dimension with extent 1 and writes its index rebased; the printer used to subtract the box
    origin a second time and the kernel crashed (SIGSEGV) on the CPEs whose tile was not the first."""
    from tuner.backends.emulator_backend import EmulatorBackend
    from tuner.space import space_for

    data = te.placeholder((1, 4, 6, 8, 8), "float32", name="data")
    weight = te.placeholder((4, 4, 3, 3, 3), "float32", name="weight")
    rc, rd, rh, rw = (te.reduce_axis((0, n), name) for n, name in ((4, "rc"), (3, "rd"), (3, "rh"), (3, "rw")))
    out = te.compute((1, 4, 4, 6, 6), lambda b, f, z, y, x: te.sum(
        data[b, rc, z + rd, y + rh, x + rw] * weight[f, rc, rd, rh, rw], axis=[rc, rd, rh, rw]), name="conv3d")
    (op,) = [op for op in differentiate([data, weight, out]).operators if op.wrt == "weight"]
    config = {"tile_i0": 4, "tile_i1": 2, "tile_i2": 3, "tile_i3": 1, "tile_i4": 3, "tile_y": 3, "grid": "8x8",
              "share": "none", "dma": "strided", "put_lines": 0, "db_a": 1, "db_b": 1, "db_c": 0, "tile_order": "col",
              "inner": "i2", "simd": 1, "unroll": 8, "acc": "reg", "pack": "none"}
    result = EmulatorBackend(workdir=tmp_path).measure_one(space_for(op.workload(), "sw26010"), config)
    assert result.status == "ok", result.error


@pytest.mark.slow
def test_argmax_operators_run_on_the_emulator_on_inputs_where_the_equality_holds():
    """The argmax and the gradients routed to it compare operands for equality: on uniform random
    inputs that never holds (every output the 'no point' value), so they are checked on small integers,
    where it holds at some points and not at others -- and the emulator must agree with TVM's build."""
    from tuner.backends.emulator_backend import random_inputs, reference
    from tuner.backends.expr_check import emulator_check
    from tuner.space import space_for

    x = te.placeholder((1, 4, 9, 9), "float32", name="X")
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    pool = te.compute((1, 4, 4, 4), lambda b, c, y, z: te.max(x[b, c, 2 * y + ry, 2 * z + rx], axis=[ry, rx]),
                      name="pool")
    ops = differentiate([x, pool]).operators
    assert all(op.compares for op in ops)
    (argmax,) = [op for op in ops if op.name == "pool_argmax"]
    found = reference(argmax.workload(), *random_inputs(argmax.workload(), np.random.default_rng(0), discrete=True))
    assert 0 < (found < 9).mean() < 1  # some windows hold a point equal to the (random) result, some do not
    for op in (argmax, ops[1]):
        summary = emulator_check(space_for(op.workload(), "sw26010"), 3, discrete_inputs=True)
        assert summary.configs_checked == 3 and summary.wrong_results == 0 and not summary.problems, summary.problems


def quadratic_form(m=5, n=4):
    """out[i] = x[i]^T W x[i]: x at two places of one product."""
    x = te.placeholder((m, n), F64, name="x")
    w = te.placeholder((n, n), F64, name="W")
    rj, rk = te.reduce_axis((0, n), "rj"), te.reduce_axis((0, n), "rk")
    out = te.compute((m,), lambda i: te.sum(x[i, rj] * w[rj, rk] * x[i, rk], axis=[rj, rk]), name="quad")
    return [x, w, out]


def test_an_input_at_two_places_of_a_reduction_gets_one_affine_operator_per_place():
    """x's gradient is W x + W^T x: one GEMM-like operator per place x appears (merged, W would be read
    at [j, r] and [r, j], no affine box), summed by the assembly; W's gradient sum_i g[i] x[i, j] x[i, k]
    reads x at two indices, as two operands. Every operator is an expression workload (affine reads),
    and the summed gradient matches finite differences and torch autograd."""
    grad = check(quadratic_form(), lambda x, w: ((x @ w) * x).sum(1))
    assert [(op.name, op.wrt, op.aliases) for op in grad.operators] == [
        ("quad_grad_x_0", "x", {}), ("quad_grad_x_1", "x", {}), ("quad_grad_W", "W", {"x_2": "x"})]
    assert all(op.workload().expr.gemm_like for op in grad.operators)
    assert [t.op.name for t in grad.operators[2].tensors[:-1]] == ["grad_quad", "x", "x_2"]
    assert "x_2 is x" in grad.describe()


def test_an_input_at_two_places_of_an_element_wise_product_gets_one_operator_per_place():
    """x * x^T + x * y: x at [i, j] (twice: one group, by the product rule) and at [j, i]; the head is
    read at [i, j] by one term and [j, i] by the other, so two element-wise operators, summed."""
    x = te.placeholder((4, 4), F64, name="x")
    y = te.placeholder((4, 4), F64, name="y")
    out = te.compute((4, 4), lambda i, j: x[i, j] * x[j, i] + x[i, j] * y[i, j], name="sym")
    grad = check([x, y, out], lambda a, b: a * a.T + a * b)
    assert sorted(op.name for op in grad.operators) == ["sym_grad_x_0", "sym_grad_x_1", "sym_grad_y"]
    for op in grad.operators:
        assert not op.workload().expr.reduce and not op.aliases
    # the sum of x's two terms is an element-wise stage with plain reads (no guard, no clamp)
    assert "if_then_else" not in str(grad.outputs["x"].op.body[0]) and len(grad.outputs["x"].op.input_tensors) == 2


def test_an_input_twice_at_one_index_is_one_term_by_the_product_rule():
    x = te.placeholder((3, 5), F64, name="x")
    w = te.placeholder((5,), F64, name="w")
    rj = te.reduce_axis((0, 5), "rj")
    out = te.compute((3,), lambda i: te.sum(x[i, rj] * x[i, rj] * w[rj], axis=rj), name="sq")
    grad = check([x, w, out], lambda a, b: (a * a * b).sum(1))
    assert [(op.name, op.aliases) for op in grad.operators] == [("sq_grad_x", {}), ("sq_grad_w", {})]


def test_an_operator_reading_each_tensor_at_one_index_keeps_its_gradient_operators(examples):
    """Per-place terms change nothing for an operator whose inputs each appear at one index."""
    from tuner.expr.workload import load_function

    grad = differentiate(load_function(f"{examples}/linalg.py:weighted_gemm")(m=6, n=5, k=4))
    assert [(op.name, op.formula, op.aliases) for op in grad.operators] == [
        ("weighted_gemm_grad_A", "sum[j < 5] (grad_weighted_gemm[i0, j] * (B[i1, j] * w[i1]))", {}),
        ("weighted_gemm_grad_B", "sum[i < 6] (grad_weighted_gemm[i, i1] * (A[i, i0] * w[i0]))", {}),
        ("weighted_gemm_grad_w", "sum[i < 6, j < 5] (grad_weighted_gemm[i, j] * (A[i, i0] * B[i0, j]))", {})]
