"""tuner.aot.cpe_fusion and tuner.space.cpe.fused: consecutive memory-bound CPE steps of one cut run as
one kernel, values passed between them in LDM; a fused kernel the placement keeps on the MPE goes
back to its members there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.compiler import lower_model, to_relax  # noqa: E402
from tuner.ir.cprint.legalized import CFunction, Work  # noqa: E402
from tuner.space.cpe.fused import Member, fuse_plans  # noqa: E402
from tuner.space.cpe.plan import KernelPlan, ParamSlice  # noqa: E402

needs_gcc = pytest.mark.needs("gcc", "make")


class Update(torch.nn.Module):
    """A momentum-like update of five element-wise operators: b = 0.9 x + g; out = (x - 0.01 b) * b."""

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        b = x * 0.9 + g
        return (x - b * 0.01) * b


def _inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)


@pytest.mark.slow
@needs_gcc
def test_a_chain_of_element_wise_operators_runs_as_one_kernel_and_matches_torch(tmp_path: Path) -> None:
    x, g = _inputs((16, 64))
    res = compile_model(Update(), "sw26010", tmp_path, lambda w: None, example_inputs=(x, g), cpe_mode="all")
    rows = [r for r in res.rows if r.where == "CPE (memory-bound)"]
    assert [r.relax_op for r in rows] == ["multiply", "add", "multiply", "subtract", "multiply"]
    assert all(r.detail.startswith("fused, 5 operators in one kernel") for r in rows), res.format_table()
    (node,) = [n for n in res.graph.nodes if n.op == "cpe"]
    assert node.relax_op == "fused(multiply, add, multiply, subtract, multiply)"
    # it reads x and g and writes the output: the four values between its operators never leave LDM
    assert [t.shape for t in [*node.inputs, *node.outputs]] == [(16, 64)] * 3
    assert len(res.memory.slot_of) == 1  # the output's slot only
    assert len(res.cpe_ops) == 1 and "_body_m4(" in (tmp_path / "slave.c").read_text()
    got = run_model(tmp_path, [x.numpy(), g.numpy()])
    np.testing.assert_allclose(got.output.reshape(16, 64), Update()(x, g).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.slow
@needs_gcc
def test_operators_whose_own_fastest_cuts_differ_fuse_on_a_cut_they_share(tmp_path: Path) -> None:
    x, g = _inputs((10, 64))  # a classifier's weight: its multiplies cut rows, its adds columns
    alone = lower_model(to_relax(Update(), (x, g)), "sw26010", lambda w: None, cpe_mode="all", fuse_cpe=False)
    assert len({n.attrs["cpe"].plan.axis for n in alone.graph.nodes}) == 2
    res = compile_model(Update(), "sw26010", tmp_path, lambda w: None, example_inputs=(x, g), cpe_mode="all")
    (node,) = res.graph.nodes
    assert node.relax_op == "fused(multiply, add, multiply, subtract, multiply)"
    got = run_model(tmp_path, [x.numpy(), g.numpy()])
    np.testing.assert_allclose(got.output.reshape(10, 64), Update()(x, g).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_the_fused_kernel_is_faster_than_its_operators_as_phases_of_one_spawn() -> None:
    from tuner.aot.launch_groups import phase_seconds
    from tuner.targets import get_target

    x, g = _inputs((64, 256))
    fused = lower_model(to_relax(Update(), (x, g)), "sw26010", lambda w: None, cpe_mode="all")
    alone = lower_model(to_relax(Update(), (x, g)), "sw26010", lambda w: None, cpe_mode="all", fuse_cpe=False)
    assert [n.op for n in alone.graph.nodes] == ["cpe"] * 5 and [n.op for n in fused.graph.nodes] == ["cpe"]
    as_phases = sum(n.attrs["cpe"].seconds for n in alone.graph.nodes) + 4 * phase_seconds(get_target("sw26010"))
    assert fused.timing().tuned_s < as_phases == pytest.approx(alone.timing().tuned_s)


@pytest.mark.slow
@needs_gcc
def test_a_fused_kernel_the_mpe_runs_faster_goes_back_to_its_operators_there(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from tuner.aot import placement
    from tuner.aot.cpe_fusion import split
    from tuner.ir.graph import Graph, Node

    unfused: list[str] = []

    def spy(graph: Graph, n: Node) -> None:
        unfused.append(n.relax_op)
        split(graph, n)

    monkeypatch.setattr(placement, "split", spy)

    x, g = _inputs((2, 4))  # eight elements: no kernel pays its spawn
    res = compile_model(Update(), "sw26010", tmp_path, lambda w: None, example_inputs=(x, g))
    assert unfused == ["fused(multiply, add, multiply, subtract, multiply)"]
    assert [n.op for n in res.graph.nodes] == ["tir"] * 5
    assert [r.relax_op for r in res.rows if r.where == "MPE"] == ["multiply", "add", "multiply", "subtract", "multiply"]
    got = run_model(tmp_path, [x.numpy(), g.numpy()])
    np.testing.assert_allclose(got.output.reshape(2, 4), Update()(x, g).numpy(), rtol=1e-6, atol=1e-7)


def _plan(axis: int, params: list[ParamSlice], n_inputs: int, name: str) -> KernelPlan:
    """A plan of ``block``-row blocks whose body copies input 0 to the output (for the composition only)."""

    def body_at(block: int, lanes: int) -> CFunction | None:
        args = ", ".join(f"SWTUNE_T *restrict p{k}" for k in range(len(params)))
        code = f"static void body({args}) {{ /* {name} */ }}"
        return CFunction("body", code, ["float32"] * len(params), [(block,)] * len(params), Work(block, block, block),
                         [f"__thread_local float g_s0[{block}];"], 4 * block)

    return KernelPlan(axis, 1, 64, params, n_inputs, 4, body_at)


ROW = ParamSlice(True, 64, 8, 0)
WHOLE = ParamSlice(False, 0, 1, 8)


def test_plans_compose_only_when_they_cut_one_way_and_slice_each_shared_tensor_alike() -> None:
    a, b = _plan(0, [ROW, ROW], 1, "a"), _plan(0, [ROW, WHOLE, ROW], 2, "b")
    fused = fuse_plans([Member(a, ("x", "t")), Member(b, ("t", "w", "y"))], ["x", "w"], ["y"], "float")
    assert fused is not None and fused.params == [ROW, WHOLE, ROW] and fused.n_inputs == 2
    body = fused.body(4)
    assert body is not None
    # the members in order, the value between them in LDM scratch, each member's scratch its own
    assert body.code.index("/* a */") < body.code.index("/* b */")
    assert "body_m0(p0, fused_t0);" in body.code and "body_m1(fused_t0, p1, p2);" in body.code
    assert any("fused_t0[32]" in d for d in body.ldm_decls)  # 4 rows of 8, a whole 64 B
    assert {"g0_s0", "g1_s0"} <= {d.split()[2].split("[")[0] for d in body.ldm_decls}
    assert body.work == Work(8, 8, 8) and body.scratch_bytes == 4 * 4 + 4 * 4 + 32 * 4
    other_axis = _plan(1, [ROW, ROW], 1, "c")
    assert fuse_plans([Member(a, ("x", "t")), Member(other_axis, ("t", "y"))], ["x"], ["y"], "float") is None
    # t read whole by the second member after the first wrote it in row blocks
    whole_t = _plan(0, [WHOLE, ROW], 1, "d")
    assert fuse_plans([Member(a, ("x", "t")), Member(whole_t, ("t", "y"))], ["x"], ["y"], "float") is None
