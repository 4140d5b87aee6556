"""Layout copies and pools on the CPEs (tuner.aot.cpe_layout, tuner.aot.cpe_ops) and launch groups
(tuner.aot.launch_groups), run on the athread emulator: results against torch, and each CPE step's
DMA (the emulator's counts) against the plan its time model uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")
F = torch.nn.functional


class _Net(torch.nn.Module):
    """Padded convs, pools with overlapping windows, and both transpose forms (rows kept / 2-D)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=2, bias=False)

    def forward(self, x: Any) -> Any:
        y = F.max_pool2d(F.relu(self.c1(x)), 3, 2, 1)  # [1, 8, 10, 10], windows overlap
        z = F.avg_pool2d(self.c2(y), 3, 2)  # [1, 8, 5, 5], overlapping, no padding
        t = z.flatten(2).transpose(1, 2)  # [1, 25, 8]: a 2-D transpose
        r = y.reshape(1, 8, 5, 20).permute(0, 2, 1, 3)  # [1, 5, 8, 20]: [R, O, C] -> [O, R, C]
        q = y.reshape(1, 2, 4, 5, 20).permute(0, 3, 2, 1, 4)  # [1, 5, 4, 2, 20]: rows of 20 kept
        v = y.reshape(2, 4, 10, 10).permute(0, 2, 1, 3)  # [2, 10, 4, 10]: [R, O, C] -> [O, R, C] twice
        return t * 2, r + 1, q - 1, v * 3


def _run(out: Path, x: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    run = run_model(out, [x], TARGET)
    return run.output, run.report["totals"]


def _pitched_lookup(w: Any) -> Any:
    """The default schedule with output rows padded to whole lines (an unpitch step follows); the
    memory-bound operators' expression tasks untuned (their CPE blocks are what is checked here)."""
    from tuner.baseline import openacc_baseline
    from tuner.space.space import ScheduleSpace
    from tuner.targets import get_target

    if w.op in ("expr", "cpe_kernel"):
        return None
    space = ScheduleSpace(w, get_target(TARGET))
    cfg = dict(openacc_baseline(space), put_lines=1)
    space.check(cfg)
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("compact,by_outer", [(False, False), (True, True)])
def test_layout_copies_and_pools_on_the_cpes_match_torch_and_their_dma_plans(tmp_path: Path, compact: bool,
                                                                             by_outer: bool, monkeypatch: Any) -> None:
    """compact: the unpitch kernel's form (a strided get, or whole pitched rows compacted in LDM);
    by_outer: the [R, O, C] -> [O, R, C] transpose's blocks (along O, or along R), made the choice."""
    import tuner.aot.cpe_layout as cpe_layout
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.aot.cpe_layout import PadOp, RowCopyOp, TransposeOp, plan_rowcopy

    monkeypatch.setattr(cpe_ops, "plan_rowcopy", lambda *a: plan_rowcopy(*a, forms=(compact,)))
    vtiles = cpe_layout._vtiles

    def chosen(*a: Any) -> list[Any]:
        forms = [op for op in vtiles(*a) if op.by_outer == by_outer][:1]
        for op in forms:
            op.seconds = 0.0  # the fastest form, whatever the model says, so that this one is run
        return forms

    monkeypatch.setattr(cpe_layout, "_vtiles", chosen)
    from tuner.bridge.extract import torch_to_relax
    from tuner.space.cpe.cuts import dma_plan
    from tuner.space.cpe.plan import CpeOp

    torch.manual_seed(3)
    model, x = _Net().eval(), torch.randn(1, 3, 20, 20)
    mod = torch_to_relax(model, (x,))
    on_cpe = compile_model(mod, TARGET, tmp_path / "cpe", _pitched_lookup, cpe_mode="all")
    on_mpe = compile_model(mod, TARGET, tmp_path / "mpe", _pitched_lookup, cpe_mode="none", group_launches=False)
    ops = [n.attrs["cpe"] for n in on_cpe.graph.nodes if n.op == "cpe"]
    kinds = {type(op).__name__ for op in ops}
    assert {"PadOp", "RowCopyOp", "TransposeOp", "CpeOp"} <= kinds, kinds
    assert {op.compact for op in ops if isinstance(op, RowCopyOp)} == {compact}
    transposes = [op for op in ops if isinstance(op, TransposeOp)]
    assert {op.mode for op in transposes} == {"rows", "tile", "vtile"}
    assert {op.by_outer for op in transposes if op.mode == "vtile"} == {by_outer}
    assert sorted(op.batch for op in transposes if op.mode == "vtile") == [1, 2]
    pools = {n.relax_op for n in on_cpe.graph.nodes if n.op == "cpe" and isinstance(n.attrs["cpe"], CpeOp)}
    assert {"nn.max_pool2d", "nn.avg_pool2d"} <= pools
    assert not [n for n in on_cpe.graph.nodes if n.op not in ("kernel", "cpe")]  # nothing left on the MPE
    assert on_cpe.timing is not None and on_cpe.timing.mpe_fraction == 0.0
    got, dma_cpe = _run(on_cpe.out_dir, x.numpy())
    got_mpe, dma_mpe = _run(on_mpe.out_dir, x.numpy())
    with torch.no_grad():
        ref = np.concatenate([t.numpy().ravel() for t in model(x)])
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(got_mpe, ref, rtol=1e-3, atol=1e-5)
    # the GEMM-like kernels move the same data either way: the difference is the CPE steps' plans
    expected = {k: 0 for k in ("get_reqs", "get_bytes", "put_reqs", "put_bytes")}
    for op in ops:
        plan = op.dma_plan() if isinstance(op, (PadOp, RowCopyOp, TransposeOp)) else dma_plan(op, 4)
        for k in expected:
            expected[k] += plan[k]
    assert {k: dma_cpe[k] - dma_mpe[k] for k in expected} == expected


@pytest.mark.slow
def test_consecutive_cpe_steps_share_one_spawn(tmp_path: Path) -> None:
    """Grouped: one spawn per run of CPE steps, the same result, and the time model charges a barrier
    instead of a spawn + join for every later phase."""
    from tuner.aot.launch_groups import phase_seconds
    from tuner.bridge.extract import torch_to_relax
    from tuner.targets import get_target

    torch.manual_seed(5)
    model, x = _Net().eval(), torch.randn(1, 3, 20, 20)
    mod = torch_to_relax(model, (x,))
    grouped = compile_model(mod, TARGET, tmp_path / "g", lambda w: None, cpe_mode="all")
    single = compile_model(mod, TARGET, tmp_path / "s", lambda w: None, cpe_mode="all", group_launches=False)
    steps = [n for n in grouped.graph.nodes if n.op in ("kernel", "cpe")]
    assert len(steps) >= 8 and all(n.attrs.get("group") is steps[0].attrs["group"] for n in steps)
    host = (grouped.out_dir / "host.c").read_text()
    assert host.count("athread_spawn(") == 1 and "swtune_group_0" in (grouped.out_dir / "slave.c").read_text()
    got, _ = _run(grouped.out_dir, x.numpy())
    got_single, _ = _run(single.out_dir, x.numpy())
    np.testing.assert_array_equal(got, got_single)
    assert grouped.timing is not None and single.timing is not None
    assert grouped.timing.kernel_launches == 1 and single.timing.kernel_launches == len(steps)
    saved = single.timing.tuned_s - grouped.timing.tuned_s
    assert saved == pytest.approx(-(len(steps) - 1) * phase_seconds(get_target(TARGET)), rel=1e-9)


class _Transpose(torch.nn.Module):
    """The last two axes swapped (a weight gradient's [512, 64] -> [64, 512] in a transformer's step)."""

    def forward(self, x: Any) -> Any:
        return x.transpose(-1, -2)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(512, 64), (700, 300), (2, 520, 100)], ids=["even", "ragged", "batched"])
def test_large_2d_transposes_run_in_square_tiles(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """Whole output rows of 512 leave LDM room for 14 rows (56-B get pieces); 64 x 64 tiles get and put
    256-B pieces: the planner takes tiles -- even, ragged in both dimensions (300 rows in blocks of 112,
    700 columns in tiles of 64), batched --, they match torch exactly, and the emulator's DMA counts are
    the plan's."""
    from tuner.aot.cpe_layout import TransposeOp
    from tuner.bridge.extract import torch_to_relax

    x = torch.randn(*shape)
    mod = torch_to_relax(_Transpose().eval(), (x,))
    on_cpe = compile_model(mod, TARGET, tmp_path / "cpe", lambda w: None, cpe_mode="all")
    on_mpe = compile_model(mod, TARGET, tmp_path / "mpe", lambda w: None, cpe_mode="none", group_launches=False)
    (op,) = [n.attrs["cpe"] for n in on_cpe.graph.nodes if n.op == "cpe"]
    assert isinstance(op, TransposeOp) and op.mode == "tile" and op.cols > 0 and op.rows >= 32
    got, dma_cpe = _run(on_cpe.out_dir, x.numpy())
    _, dma_mpe = _run(on_mpe.out_dir, x.numpy())
    np.testing.assert_array_equal(got, x.transpose(-1, -2).numpy().ravel())
    plan = op.dma_plan()
    assert {k: dma_cpe[k] - dma_mpe[k] for k in plan} == plan


class _Permute(torch.nn.Module):
    def __init__(self, axes: tuple[int, ...]) -> None:
        super().__init__()
        self.axes = axes

    def forward(self, x: Any) -> Any:
        return x.permute(*self.axes) * 2


@pytest.mark.slow
@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5, 6), (1, 3, 0, 2, 4)), ((3, 2, 7, 5, 4), (3, 1, 0, 2, 4))],
                         ids=["outer-around-O", "O-first"])
def test_a_permutation_with_outer_axes_around_o_runs_as_otile(tmp_path: Path, shape: tuple[int, ...],
                                                              axes: tuple[int, ...]) -> None:
    """[N][A][R][O][C] -> [A][O][N][R][C] (a GEMM's runtime pack of an NCHW activation, ShiftNet's 1 x 1
    conv's weight gradient): each outer index reads one contiguous [R, O, C] block and puts O pieces; the
    planner takes it over "rows" (pieces of C), it matches torch exactly, and the emulator's DMA counts are
    the plan's."""
    from tuner.aot.cpe_layout import TransposeOp, plan_transpose
    from tuner.bridge.extract import torch_to_relax
    from tuner.targets import get_target

    # ShiftNet's pack of its [8, 72, 16, 16] activations, tiles of 24 channels: otile beats the MPE's copy
    pack = plan_transpose((1, 8, 3, 24, 16, 1, 1, 16), (0, 2, 4, 6, 1, 3, 5, 7), get_target(TARGET), 4)
    assert pack is not None and pack.mode == "otile" and pack.seconds < 100e-6
    x = torch.randn(*shape)
    mod = torch_to_relax(_Permute(axes).eval(), (x,))
    on_cpe = compile_model(mod, TARGET, tmp_path / "cpe", lambda w: None, cpe_mode="all")
    on_mpe = compile_model(mod, TARGET, tmp_path / "mpe", lambda w: None, cpe_mode="none", group_launches=False)
    ops = [n.attrs["cpe"] for n in on_cpe.graph.nodes if n.op == "cpe"]
    (op,) = [o for o in ops if isinstance(o, TransposeOp)]
    assert op.mode == "otile"
    got, dma_cpe = _run(on_cpe.out_dir, x.numpy())
    _, dma_mpe = _run(on_mpe.out_dir, x.numpy())
    np.testing.assert_array_equal(got, (x.permute(*axes) * 2).numpy().ravel())
    expected = {k: 0 for k in ("get_reqs", "get_bytes", "put_reqs", "put_bytes")}
    from tuner.space.cpe.cuts import dma_plan

    for o in ops:
        plan = o.dma_plan() if isinstance(o, TransposeOp) else dma_plan(o, 4)
        for k in expected:
            expected[k] += plan[k]
    assert {k: dma_cpe[k] - dma_mpe[k] for k in expected} == expected
