"""The schedule space of memory-bound CPE kernels (tuner.space.cpe.schedule, tuner.aot.cpe_ops): the
analysis' validity and choice, and kernels run on the athread emulator in given configurations
(double-buffered gets on and off, fewer active CPEs) against torch, their DMA counted by the emulator
against the analysis' counts; a pool whose plane does not fit LDM cut along its output rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.space.cpe.cuts import dma_plan  # noqa: E402
from tuner.space.cpe.schedule import Operand, Space, Why, Window, analyse  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"
F = torch.nn.functional
needs_cc = pytest.mark.needs("gcc", "make")


def test_analysis_marks_invalid_configs_and_picks_the_least_time() -> None:
    tgt = get_target(TARGET)
    # a softmax-like op on [64, 4096] rows of 4 B: blocks of rows, one sliced input, one output
    ops = [Operand(True, True, 4096), Operand(False, True, 4096)]
    sizes = [1, 2, 4, 8, 16]
    cycles = {b: 6.0 * 4096 * b for b in sizes}
    space = analyse(tgt, 4, 1, 64, ops, sizes, cycles, {b: 0 for b in sizes})
    row = 4096 * 4
    # LDM: the input doubled with db, the output once
    assert np.array_equal(space.ldm_bytes, space.block * row * np.where(space.db, 3, 2))
    over = space.ldm_bytes > tgt.ldm_budget_bytes
    assert over.any() and set(space.why[over & (space.active <= space.blocks)]) == {Why.LDM.value}
    assert set(space.why[space.active > space.blocks]) == {Why.IDLE_CPES.value}
    ok = space.why == Why.OK.value
    assert ok.any() and not ok.all()
    i = space.best()
    assert ok[i] and space.seconds[i] == space.seconds[ok].min()
    # double buffering never loses against the same block and CPEs (the overlap only hides gets)
    for b, a in {(int(b), int(a)) for b, a in zip(space.block, space.active)}:
        on = (space.block == b) & (space.active == a) & space.db
        off = (space.block == b) & (space.active == a) & ~space.db
        assert space.seconds[on][0] <= space.seconds[off][0]
    # every block moves its bytes once: 64 rows in, 64 rows out, whatever the configuration
    assert set(space.get_bytes.tolist()) == {64 * row} and set(space.put_bytes.tolist()) == {64 * row}
    assert np.array_equal(space.get_reqs, space.blocks)


def test_window_counts_only_the_rows_inside_the_input() -> None:
    """A 3x3 stride-2 pad-1 pool on 112 rows: the first window starts one row above the plane."""
    win = Window(2, 3, 1, 112)
    fetched = win.fetched_rows(4, 56 // 4)
    assert fetched[0] == 8 and fetched[1:].tolist() == [9] * 13  # 2*4+1 rows, the first one padding
    tgt = get_target(TARGET)
    ops = [Operand(True, True, 112, win), Operand(False, True, 56)]
    space = analyse(tgt, 4, 3, 56, ops, [4], {4: 100.0}, {4: 0})
    assert set(space.get_bytes.tolist()) == {3 * int(fetched.sum()) * 112 * 4}
    assert set(space.ldm_bytes[~space.db].tolist()) == {(9 * 112 + 4 * 56) * 4}


class _Net(torch.nn.Module):
    """Padded max and avg pools (overlapping windows), a softmax and a layer norm: only memory-bound
    operators, so the emulator's DMA is theirs alone."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(40)

    def forward(self, x: Any) -> Any:
        y = F.max_pool2d(x, 3, 2, 1)  # [1, 16, 20, 20]
        z = F.avg_pool2d(y, 3, 1, 1)  # count_include_pad (torch's default)
        s = torch.softmax(z.reshape(1, 16, 400), dim=-1)
        return s * 3, self.ln(z.reshape(1, 160, 40))


def _chooser(db: bool, active: int, chosen: list[tuple[Space, int]]) -> Any:
    """Run the fastest configuration with this db and (when there are enough blocks) these CPEs."""

    def pick(space: Space) -> int:
        ok = (space.why == Why.OK.value) & (space.db == db)
        want = ok & (space.active == np.minimum(active, space.blocks))
        cand = np.flatnonzero(want if want.any() else ok)
        if not len(cand):
            return -1
        i = int(cand[np.argmin(space.seconds[cand])])
        chosen.append((space, i))
        return i

    return pick


def _row_of(op: Any, chosen: list[tuple[Space, int]]) -> tuple[Space, int]:
    return next((s, i) for s, i in reversed(chosen) if len(s) == op.configs and s.block[i] == op.block
                and s.active[i] == op.active and s.db[i] == op.db and s.ldm_bytes[i] == op.ldm_bytes)


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("db,active", [(False, 64), (True, 64), (True, 8), (False, 4)])
def test_configured_kernels_match_torch_and_the_analysis_dma(tmp_path: Path, monkeypatch: Any, db: bool,
                                                             active: int) -> None:
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.aot.cpe_layout import PadOp, RowCopyOp, TransposeOp
    from tuner.bridge.extract import torch_to_relax

    chosen: list[tuple[Space, int]] = []
    monkeypatch.setattr(cpe_ops, "choose", _chooser(db, active, chosen))
    torch.manual_seed(7)
    model, x = _Net().eval(), torch.randn(1, 16, 40, 40)
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "m", lambda w: None, cpe_mode="all")
    ops = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    mine = [op for op in ops if isinstance(op, cpe_ops.CpeOp)]
    names = {m.relax_op for n in result.graph.nodes if n.op == "cpe" and isinstance(n.attrs["cpe"], cpe_ops.CpeOp)
             for m in n.attrs.get("members", [n])}  # a fused kernel's operators (tuner.aot.cpe_fusion)
    assert {"nn.max_pool2d", "nn.avg_pool2d", "nn.softmax", "nn.layer_norm"} <= names, names
    assert {op.db for op in mine} == {db}
    assert all(op.active == min(active, op.blocks) for op in mine), [(op.active, op.blocks) for op in mine]
    run = run_model(result.out_dir, [x.numpy()], TARGET)
    with torch.no_grad():
        ref = np.concatenate([t.numpy().ravel() for t in model(x)])
    np.testing.assert_allclose(run.output, ref, rtol=1e-4, atol=1e-6)
    # the emulator's DMA: the analysis' counts of each kernel's configuration (layout copies: theirs)
    expected = {k: 0 for k in ("get_reqs", "get_bytes", "put_reqs", "put_bytes")}
    for op in ops:
        if isinstance(op, (PadOp, RowCopyOp, TransposeOp)):
            plan = op.dma_plan()
        else:
            space, i = _row_of(op, chosen)
            plan = space.dma(i)
            assert plan == dma_plan(op, 4)
        for k in expected:
            expected[k] += plan[k]
    assert {k: run.report["totals"][k] for k in expected} == expected


@needs_cc
@pytest.mark.parametrize("kind,db", [("max", True), ("avg", False)])
def test_pool_larger_than_ldm_runs_on_the_cpes_by_output_rows(tmp_path: Path, monkeypatch: Any, kind: str,
                                                              db: bool) -> None:
    """ResNet's first pool at full size (112x112 planes, 3x3 stride 2 pad 1): one input plane with its
    output does not fit LDM, so it is cut along output rows with the halo; it beats the MPE."""
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.bridge.extract import torch_to_relax

    chosen: list[tuple[Space, int]] = []
    monkeypatch.setattr(cpe_ops, "choose", _chooser(db, 64, chosen))

    class Pool(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return F.max_pool2d(x, 3, 2, 1) if kind == "max" else F.avg_pool2d(x, 3, 2, 1)

    torch.manual_seed(11)
    model, x = Pool().eval(), torch.randn(1, 2, 112, 112)
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "p", lambda w: None)  # cpe_mode faster
    (node,) = [n for n in result.graph.nodes if n.relax_op == f"nn.{kind}_pool2d"]
    assert node.op == "cpe"
    op = node.attrs["cpe"]
    assert op.window is not None and op.axis == 2 and op.db == db
    assert (112 * 112 + 56 * 56) * 4 > get_target(TARGET).ldm_budget_bytes  # a whole plane would not fit
    run = run_model(result.out_dir, [x.numpy()], TARGET)
    with torch.no_grad():
        ref = model(x).numpy().ravel()
    np.testing.assert_allclose(run.output, ref, rtol=1e-5, atol=1e-6)
    space, i = _row_of(op, chosen)
    assert {k: run.report["totals"][k] for k in ("get_reqs", "get_bytes", "put_reqs", "put_bytes")} == space.dma(i)


def test_chosen_schedule_is_counted_on_its_own_body(tmp_path: Path) -> None:
    """The analysis predicts bodies between two legalized sizes; the kernel that is emitted carries
    figures counted on its own legalized body: LDM = operand blocks (inputs doubled with db) + the
    body's scratch, and its time is the analysis' at that body's exact counts."""
    from tuner.bridge.extract import torch_to_relax
    from tuner.space.cpe.plan import CpeOp
    from tuner.space.cpe.plan import cycles as _cycles

    model, x = torch.nn.LayerNorm(96).eval(), torch.randn(1, 384, 96)
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / "ln", lambda w: None, cpe_mode="all")
    (op,) = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    assert isinstance(op, CpeOp) and op.configs > op.valid > 1
    ldm = sum(p.elems * (2 if op.db and p.sliced and k < op.n_inputs else 1) for k, p in enumerate(op.params)) * 4
    assert op.ldm_bytes == ldm + op.body.scratch_bytes
    tgt = get_target(TARGET)
    space = analyse(tgt, 4, op.lead, op.nj * op.block, op.operands(), [op.block],
                    {op.block: _cycles(op.body.work, tgt)}, {op.block: op.body.scratch_bytes})
    same = np.flatnonzero((space.db == op.db) & (space.active == op.active))
    assert len(same) == 1 and space.seconds[same[0]] == pytest.approx(op.seconds, rel=1e-12)
