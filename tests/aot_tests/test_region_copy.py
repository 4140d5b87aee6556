"""Region copies on the CPEs (tuner.aot.cpe_region, issue #28): concat, split, strided_slice, tile and
a take of one constant index,
each compiled from a tiny torch model, run on the athread emulator and checked against torch; each
runs on the CPEs (its row in the report), and the emulator's DMA counts equal the kernel's plan."""

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

# name -> (Relax operator, function of three inputs [2, 6, 8, 10])
OPS: dict[str, tuple[str, Any]] = {
    "concat_axis1": ("concat", lambda x, y, z: (torch.cat([x, y, z], dim=1),)),
    "concat_last": ("concat", lambda x, y, z: (torch.cat([x, y, z], dim=-1),)),
    "split_equal": ("split", lambda x, y, z: torch.split(x, 2, dim=1)),
    "split_unequal": ("split", lambda x, y, z: torch.split(x, [1, 4, 5], dim=-1)),
    "slice_inner_1": ("strided_slice", lambda x, y, z: (x[:, :, :, 2:9],)),
    "slice_inner_2": ("strided_slice", lambda x, y, z: (x[:, :, :, 1:10:2],)),
    "slice_outer_1": ("strided_slice", lambda x, y, z: (x[:, 1:5],)),
    "slice_outer_2": ("strided_slice", lambda x, y, z: (x[:, 0:6:2],)),
    "slice_two_axes": ("strided_slice", lambda x, y, z: (x[:, 1:6:2, :, 3:7],)),
    "tile": ("tile", lambda x, y, z: (x.repeat(1, 2, 1, 3),)),
    "tile_new_axis": ("tile", lambda x, y, z: (x.repeat(2, 1, 1, 1, 1),)),
    "tile_last": ("tile", lambda x, y, z: (x.repeat(1, 1, 1, 3),)),
    # a take of one constant index (attention's qkv[0]) is the slice [i, i + 1) viewed without the axis
    "take_one_outer": ("take", lambda x, y, z: (x[1],)),
    "take_one_inner": ("take", lambda x, y, z: (x[:, -2],)),
}


class _Op(torch.nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.fn = OPS[name][1]

    def forward(self, x: Any, y: Any, z: Any) -> Any:
        return self.fn(x, y, z)


# the whole-row form (tuner.aot.cpe_region.InterleaveOp): concat, split, a tile along one axis
ROWS = {"concat_axis1", "concat_last", "split_equal", "split_unequal", "tile_new_axis", "tile_last"}


@pytest.mark.slow
@pytest.mark.parametrize("name,form", [(n, "regions") for n in sorted(OPS)] + [(n, "rows") for n in sorted(ROWS)])
def test_region_copy_on_the_cpes_matches_torch_and_its_dma_plan(tmp_path: Path, name: str, form: str,
                                                                monkeypatch: Any) -> None:
    """form: the kernel made the only choice (the region form, or the whole-row form; offload would
    otherwise keep the fastest of these and the generic sliced kernel of tuner.space.cpe)."""
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.aot.cpe_region import InterleaveOp, RegionOp, plan_copy
    from tuner.bridge.extract import torch_to_relax

    monkeypatch.setattr(cpe_ops, "plan_copy", lambda *a: plan_copy(*a, forms=(form,)))
    monkeypatch.setattr(cpe_ops, "kernel_for", lambda *a: None)  # not the generic sliced kernel either
    kind = RegionOp if form == "regions" else InterleaveOp

    torch.manual_seed(1)
    xs = [torch.randn(2, 6, 8, 10) for _ in range(3)]
    model = _Op(name).eval()
    result = compile_model(torch_to_relax(model, tuple(xs)), TARGET, tmp_path / name, lambda w: None,
                           cpe_mode="all")
    relax_op = OPS[name][0]
    rows = [r for r in result.rows if r.relax_op == relax_op]
    assert rows and {r.where for r in rows} == {"CPE (memory-bound)"}, result.rows
    ops = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    # one step (the slice of two axes: torch exports a strided_slice per axis)
    assert len(ops) == (2 if name == "slice_two_axes" else 1) and all(isinstance(op, kind) for op in ops), ops
    run = run_model(result.out_dir, [x.numpy() for x in xs], TARGET)
    with torch.no_grad():
        ref = np.concatenate([t.numpy().ravel() for t in model(*xs)])
    np.testing.assert_array_equal(run.output, ref)
    plans = [op.dma_plan() for op in ops]
    expected = {k: sum(p[k] for p in plans) for k in plans[0]}
    assert {k: run.report["totals"][k] for k in expected} == expected


def test_region_copies_of_model_size_win_on_the_cpes() -> None:
    """At DenseNet/U-Net/GPT-2 sizes the time model puts concat, split, slices and tile on the CPEs
    (``cpe_mode="faster"`` keeps the faster of them and the MPE); every block fits the LDM budget.
    Not here: a tile along several axes whose innermost repeat leaves short runs (strided puts of a
    few elements), which the model keeps on the MPE."""
    from tuner.aot.cpe_region import plan_copy
    from tuner.aot.launch_groups import phase_seconds
    from tuner.targets import get_target

    tgt = get_target(TARGET)
    cases = [
        (("concat", 1), [(1, 64, 56, 56), (1, 32, 56, 56), (1, 32, 56, 56)], [(1, 128, 56, 56)]),
        (("concat", 3), [(1, 64, 56, 28), (1, 64, 56, 28)], [(1, 64, 56, 56)]),  # the whole-row form
        (("split", 1), [(1, 116, 28, 28)], [(1, 58, 28, 28), (1, 58, 28, 28)]),
        (("split", 2), [(1, 128, 2304)], [(1, 128, 768)] * 3),  # GPT-2's qkv
        (("strided_slice", (2, 3), (4, 4), (60, 60), (1, 1)), [(1, 64, 64, 64)], [(1, 64, 56, 56)]),
        (("strided_slice", (1,), (0,), (128,), (2,)), [(1, 128, 32, 32)], [(1, 64, 32, 32)]),
        (("strided_slice", (3,), (0,), (64,), (2,)), [(1, 64, 64, 64)], [(1, 64, 64, 32)]),
        (("tile", ), [(1, 64, 28, 28)], [(2, 128, 28, 28)]),
        (("tile", ), [(1, 64, 28, 28)], [(1, 64, 28, 56)]),
    ]
    for spec, ins, outs in cases:
        op = plan_copy(spec, ins, outs, tgt, 4)
        assert op is not None, spec
        assert op.ldm_bytes <= tgt.ldm_budget_bytes
        # the MPE's time is at least the bytes it streams at its copy rate (tuner.aot.timing)
        mpe = sum(int(np.prod(s)) for s in [*ins, *outs]) * 4 / tgt.mpe_copy_Bps
        assert op.seconds + phase_seconds(tgt) < mpe, (spec, op.seconds, mpe)
