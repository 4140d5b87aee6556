"""The Relax reader's lowering passes (tuner.ir.passes), each on a small model: the graph it builds is
evaluated step by step (a generic step's PrimFunc through TVM's llvm build, a kernel node in numpy)
and checked against torch, and each pass's own mark on the graph is asserted (a batch norm's folded
scale and shift, a constant folded at compile time, a dead node removed, a group norm's steps split by
the target's LDM)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from tuner.bridge.extract import torch_to_relax  # noqa: E402
from tuner.ir import llvm  # noqa: E402
from tuner.ir.graph import Graph, Node, Note, Tensor, Where  # noqa: E402
from tuner.ir.passes.dead_code import remove_dead_code  # noqa: E402
from tuner.ir.passes.fold_batch_norm import scale_and_shift  # noqa: E402
from tuner.ir.passes.norm_rewrites import group_bytes  # noqa: E402
from tuner.ir.relax_reader import KEPT_OPS, PIPELINE, read_relax  # noqa: E402
from tuner.targets import get_target  # noqa: E402

F = torch.nn.functional


def _values(graph: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs on ``inputs``, each step run as the program would (views share storage)."""
    store: dict[int, np.ndarray] = {}  # root tensor id -> its values, flat

    def read(t: Tensor) -> np.ndarray:
        if t.kind == "const":
            assert t.data is not None
            return t.data.reshape(t.shape)
        return store[t.root.id].reshape(t.shape)

    for t, x in zip(graph.inputs, inputs):
        store[t.id] = np.asarray(x, dtype=graph.dtype).reshape(-1)
    for n in graph.nodes:
        args = [read(t) for t in n.inputs]
        if n.op == "tir":
            outs = [(t.shape, t.dtype) for t in n.outputs]
            results = llvm.run(n.attrs["prim_func"], args, outs)
        elif n.op == "kernel" and n.attrs["workload"].op == "conv2d":
            w = n.attrs["workload"]
            y = F.conv2d(torch.from_numpy(args[0]), torch.from_numpy(args[1]), stride=(w.stride_h, w.stride_w),
                         dilation=(w.dil_h, w.dil_w), groups=w.groups)
            results = [y.numpy()]
        elif n.op == "kernel":  # dense [M, K] x [N, K], batch_matmul [B, M, K] x [B, N, K]
            results = [args[0] @ np.swapaxes(args[1], -1, -2)]
        elif n.op == "transpose":
            results = [np.transpose(args[0], n.attrs["axes"])]
        else:
            raise AssertionError(f"no evaluation of a {n.op} node here")
        for t, v in zip(n.outputs, results):
            store[t.id] = np.ascontiguousarray(v, dtype=t.dtype).reshape(-1)
    return [read(t) for t in graph.outputs]


def _read(model: Any, *inputs: Any, target: str | None = "sw26010", atol: float = 1e-5
          ) -> tuple[Graph, list[np.ndarray]]:
    """The model's graph for ``target`` and the check that it computes torch's outputs."""
    graph = read_relax(torch_to_relax(model.eval(), inputs), target)
    with torch.no_grad():
        ref = model(*inputs)
    refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    got = _values(graph, [x.numpy() for x in inputs])
    for g, r in zip(got, refs):
        np.testing.assert_allclose(g.reshape(r.shape), r, rtol=1e-4, atol=atol)
    return graph, got


def _steps(graph: Graph, relax_op: str) -> list[Node]:
    return [n for n in graph.nodes if n.relax_op == relax_op]


def _notes(graph: Graph, where: Where) -> list[Note]:
    return [s for s in graph.steps if isinstance(s, Note) and s.where == where]


def test_the_pipeline_reads_each_operator_once_and_legalization_keeps_exactly_those() -> None:
    ruled = [op for p in PIPELINE for op in p.rules]
    assert len(ruled) == len(set(ruled))
    assert set(KEPT_OPS) == set(ruled)
    names = [p.name for p in PIPELINE]
    # a legalized operator on constants folds before any rewrite of it; dead code goes last
    assert names.index("fold_constants") < names.index("norm_rewrites") < names.index("take_one")
    assert names[-1] == "dead_code"


class _ConvBatchNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        with torch.no_grad():  # statistics and affine parameters that are not the identity
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: Any) -> Any:
        return self.bn(self.conv(x))


def test_a_batch_norm_folds_to_a_scale_and_shift_that_computes_what_torch_does() -> None:
    torch.manual_seed(0)
    model = _ConvBatchNorm()
    graph, _ = _read(model, torch.randn(1, 3, 8, 8))
    bn = _steps(graph, "nn.batch_norm")
    # one multiply and one add, each by a per-channel constant; no statistic is computed at run time
    assert len(bn) == 2 and all(n.op == "tir" for n in bn)
    scale, shift = (next(t for t in n.inputs if t.kind == "const") for n in bn)
    assert scale.shape == shift.shape == (8, 1, 1)
    b = model.bn
    s, h = scale_and_shift(*(v.detach().numpy() for v in (b.weight, b.bias, b.running_mean, b.running_var)),
                           b.eps)
    np.testing.assert_allclose(scale.data.reshape(-1), s, rtol=1e-6)
    np.testing.assert_allclose(shift.data.reshape(-1), h, rtol=1e-6, atol=1e-7)
    # folded into the conv (what tuner.aot.fusion does with the two steps): the same numbers
    x = torch.randn(2, 3, 8, 8)
    w = model.conv.weight.detach() * torch.from_numpy(s).float()[:, None, None, None]
    bias = model.conv.bias.detach() * torch.from_numpy(s).float() + torch.from_numpy(h).float()
    with torch.no_grad():
        np.testing.assert_allclose(F.conv2d(x, w, bias, padding=1).numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_a_batch_norm_without_scale_or_center_leaves_gamma_or_beta_out() -> None:
    gamma, beta, mean, var = np.array([2.0]), np.array([3.0]), np.array([1.0]), np.array([3.0])
    assert scale_and_shift(gamma, beta, mean, var, 1.0) == (pytest.approx([1.0]), pytest.approx([2.0]))
    assert scale_and_shift(gamma, beta, mean, var, 1.0, scale=False) == (pytest.approx([0.5]), pytest.approx([2.5]))
    assert scale_and_shift(gamma, beta, mean, var, 1.0, center=False) == (pytest.approx([1.0]), pytest.approx([-1.0]))


class _ConstantArithmetic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 6))

    def forward(self, x: Any) -> Any:
        return x + torch.exp(self.w) * 2.0  # exp(w) * 2 depends on the weights alone


def test_arithmetic_on_constants_is_folded_at_compile_time() -> None:
    torch.manual_seed(0)
    model = _ConstantArithmetic()
    graph, _ = _read(model, torch.randn(4, 6))
    folded = [s for s in _notes(graph, Where.COMPILE_TIME) if s.detail == "constant operands folded"]
    assert {s.relax_op for s in folded} == {"exp", "multiply"}
    (add,) = graph.nodes  # the one step at run time
    (const,) = [t for t in add.inputs if t.kind == "const"]
    with torch.no_grad():
        np.testing.assert_allclose(const.data, (torch.exp(model.w) * 2.0).numpy(), rtol=1e-6)


def test_a_node_nothing_reads_is_removed_and_reported() -> None:
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            kept = bb.emit(relax.op.nn.relu(x), "kept")
            bb.emit(relax.op.exp(x), "unused")
            out = bb.emit_output(kept)
        bb.emit_func_output(out)
    graph = read_relax(bb.get(), "sw26010")
    assert [n.source for n in graph.nodes] == ["kept"]
    assert [(s.source, s.relax_op) for s in _notes(graph, Where.REMOVED)] == [("unused", "exp")]
    v = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    (got,) = _values(graph, [v])
    np.testing.assert_array_equal(got, np.maximum(v, 0))


def test_dead_code_keeps_a_node_read_through_a_view_of_its_output() -> None:
    x = Tensor(1, (2, 3), "float32", "input", "x")
    a, b, c = (Tensor(i, (2, 3), "float32", "temp", n) for i, n in ((2, "a"), (3, "b"), (4, "c")))
    a_flat = Tensor(5, (6,), "float32", "temp", "a.flat", base=a)
    steps: list[Node | Note] = [Node("tir", [x], a, {}, "exp", "a"), Node("tir", [x], b, {}, "relu", "b"),
                                Node("tir", [a_flat], c, {}, "neg", "c")]
    got = remove_dead_code(steps, [c])
    assert [type(s).__name__ for s in got] == ["Node", "Note", "Node"]
    assert got[1] == Note("b", "relu", Where.REMOVED)


def test_a_matmul_reads_a_transposed_operand_through_its_source() -> None:
    class Attention(torch.nn.Module):
        def forward(self, q: Any, k: Any) -> Any:
            return q @ k.transpose(-2, -1)

    torch.manual_seed(0)
    graph, _ = _read(Attention(), torch.randn(2, 5, 8), torch.randn(2, 7, 8))
    # the kernel reads k as [B, N, K] as it is: the transpose is dead code
    assert [n.op for n in graph.nodes] == ["kernel"]
    assert [s.relax_op for s in _notes(graph, Where.REMOVED)] == ["permute_dims"]


def test_a_take_of_one_index_is_a_region_copy() -> None:
    class First(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x[1] * 2.0

    torch.manual_seed(0)
    graph, _ = _read(First(), torch.randn(3, 4, 5))
    (sliced,) = [n for n in graph.nodes if n.relax_op == "take"]
    assert sliced.attrs["region"] == ("strided_slice", (0,), (1,), (2,), (1,))


@pytest.mark.parametrize("groups,shape", [(4, (1, 16, 8, 8)), (2, (1, 8, 64, 64))])
def test_a_group_norm_is_split_as_the_targets_ldm_requires(groups: int, shape: tuple[int, ...]) -> None:
    """A group that fits LDM twice is one normalisation step, then the scale and the shift; a larger
    one is two passes of several steps; on SW26010-Pro's larger LDM (and with no target) the 64 KB
    group of the second case is one step. Every form computes torch's group norm (to float32 sums of
    16384 elements in TVM's order, on data off zero mean)."""
    torch.manual_seed(0)
    gn = torch.nn.GroupNorm(groups, shape[1])
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
    x = torch.randn(*shape) + 3
    group = 4 * shape[1] // groups * shape[2] * shape[3]
    counts = {}
    for target in ("sw26010", "sw26010-pro", None):
        graph, _ = _read(gn, x, target=target, atol=1e-4)
        counts[target] = len(_steps(graph, "nn.group_norm"))
        fits = 2 * group <= group_bytes(None if target is None else get_target(target))
        assert (counts[target] == 3) == fits, (target, counts)
    assert group_bytes(get_target("sw26010")) == 55 * 1024
    assert counts["sw26010-pro"] == counts[None] == 3


def test_a_reshape_is_a_view_and_a_padded_conv1d_a_conv2d_kernel_of_height_one() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 6, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return self.conv(x.reshape(1, 4, 10)).flatten(1)

    torch.manual_seed(0)
    graph, _ = _read(Model(), torch.randn(40))
    # the input's reshape and the output's flatten are views of the tensors they reshape: no step
    assert [s.detail for s in _notes(graph, Where.VIEW)] == ["[40] -> [1, 4, 10]", "[1, 6, 10] -> [1, 60]"]
    pad, conv, bias = graph.nodes  # the conv input's padding is a step of its own, then the kernel
    assert bias.relax_op == "add"
    assert pad.relax_op == "nn.pad (conv input)" and (pad.attrs["pad_h"], pad.attrs["pad_w"]) == (0, 1)
    w = conv.attrs["workload"]
    assert (conv.op, w.op, w.h, w.w, w.k) == ("kernel", "conv2d", 1, 10, 6)


def _relax(params: list[tuple[str, tuple[int, ...], str]], body: Any) -> Any:
    """A Relax module whose main takes ``params`` and returns ``body(*vars)``."""
    from tvm import relax

    bb = relax.BlockBuilder()
    vs = [relax.Var(n, relax.TensorType(shape, dtype)) for n, shape, dtype in params]
    with bb.function("main", vs):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(body(*vs), "y"))
        bb.emit_func_output(out)
    return bb.get()


def test_the_mean_over_ranks_is_an_allreduce_node_and_another_extern_function_is_refused() -> None:
    from tvm import relax

    from tuner.ir.graph import ALLREDUCE_MEAN, AotError

    params = [("g", (4, 8), "float32")]
    graph = read_relax(_relax(params, lambda g: relax.call_dps_packed(ALLREDUCE_MEAN, relax.Tuple([g]), g.ty)),
                       "sw26010")
    (node,) = graph.nodes
    assert (node.op, node.inputs, node.output) == ("allreduce", graph.inputs, graph.outputs[0])
    with pytest.raises(AotError, match="my_extern"):
        read_relax(_relax(params, lambda g: relax.call_dps_packed("my_extern", relax.Tuple([g]), g.ty)), "sw26010")


def test_generic_steps_carry_the_cpe_kernel_that_runs_them() -> None:
    from tvm import relax

    f32 = "float32"
    concat = read_relax(_relax([("a", (2, 3, 4), f32), ("b", (2, 5, 4), f32)],
                               lambda a, b: relax.op.concat([a, b], axis=1)), "sw26010")
    assert concat.nodes[0].attrs["region"] == ("concat", 1)
    gather = read_relax(_relax([("table", (10, 4), f32), ("ids", (3,), "int64")],
                               lambda t, i: relax.op.take(t, i, axis=0)), "sw26010")
    assert gather.nodes[0].attrs["gather"] == "fast"
    resize = read_relax(_relax([("x", (1, 2, 4, 4), f32)],
                               lambda x: relax.op.image.resize2d(x, (8, 8), method="nearest_neighbor")), "sw26010")
    assert resize.nodes[0].attrs["resize"][0] == "nearest_neighbor"
    (exp,) = read_relax(_relax([("x", (4, 8), f32)], relax.op.exp), "sw26010").nodes
    assert exp.attrs["expr_workload"].key.startswith("expr")  # an element-wise expression task
    assert not {"region", "gather", "resize"} & set(exp.attrs)


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_on_sw26010_pro_a_group_sw26010_splits_runs_in_one_step_on_the_cpes(tmp_path: Any) -> None:
    """The decision the target's LDM changes: a 32 KB group (64 KB in and out) is two passes on SW26010
    and one normalisation on SW26010-Pro, whose CPE kernels hold it; the program computes torch's."""
    from emulator_helpers import run_model

    from tuner.aot import compile_model

    torch.manual_seed(0)
    gn = torch.nn.GroupNorm(8, 64).eval()
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
        x = torch.randn(1, 64, 32, 32)
        ref = gn(x).numpy()
    for target, steps in (("sw26010-pro", 3), ("sw26010", 14)):
        result = compile_model(torch_to_relax(gn, (x,)), target, tmp_path / target, lambda w: None, cpe_mode="all")
        where = [r.where for r in result.rows if r.relax_op == "nn.group_norm"]
        assert len(where) == steps and set(where) == {Where.CPE_MEMORY_BOUND}, result.rows
        got = run_model(result.out_dir, [x.numpy()], target).output
        np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-4)
