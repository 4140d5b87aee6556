"""Region copies on the CPEs (tuner.aot.cpe_region, issue #28): concat, split, strided_slice, tile,
a take of one constant index and slice_scatter (a slice's gradient, issue #45),
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


# the whole-row form (tuner.aot.cpe_region.InterleaveOp): concat, split, a tile along one axis, a slice of one
ROWS = {"concat_axis1", "concat_last", "split_equal", "split_unequal", "tile_new_axis", "tile_last", "slice_inner_1",
        "slice_inner_2", "slice_outer_1", "slice_outer_2", "slice_two_axes", "take_one_outer", "take_one_inner"}


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


# name -> (axis, start, end, step, the source's extent along the axis) of a slice_scatter into [2, 6, 8, 10]
SCATTERS: dict[str, tuple[int, int, int, int, int]] = {
    "scatter_outer_1": (1, 1, 5, 1, 4),
    "scatter_outer_2": (1, 1, 6, 2, 3),  # gaps between the positions: a strided box of the input's
    "scatter_inner_1": (3, 2, 9, 1, 7),
    "scatter_inner_3": (3, 0, 10, 3, 4),
    "scatter_open_end": (2, 5, 2**63 - 1, 1, 3),  # torch's "to the end"
}


class _Scatter(torch.nn.Module):
    def __init__(self, name: str, zeros: bool) -> None:
        super().__init__()
        self.axis, self.start, self.end, self.step, _ = SCATTERS[name]
        self.zeros = zeros

    def forward(self, *xs: Any) -> Any:
        into, src = (torch.zeros(2, 6, 8, 10), *xs) if self.zeros else xs  # a slice's gradient: into zeros
        return torch.slice_scatter(into, src, self.axis, self.start, self.end, self.step)


def test_slice_scatter_regions_cover_the_output_once_with_torchs_values() -> None:
    """Every position of the output is written by exactly one region (the CPEs run them in no set
    order), with torch's value: shapes, axes, bounds and steps at random."""
    from tuner.aot.cpe_region import regions_of

    rng = np.random.default_rng(0)
    for _ in range(200):
        shape = tuple(int(v) for v in rng.integers(1, 7, rng.integers(1, 5)))
        axis = int(rng.integers(len(shape)))
        start = int(rng.integers(0, shape[axis] + 1))
        end, step = int(rng.integers(start, shape[axis] + 3)), int(rng.integers(1, 4))
        src_shape = tuple(len(range(start, min(end, shape[axis]), step)) if d == axis else e
                          for d, e in enumerate(shape))
        x, src = rng.standard_normal(shape), rng.standard_normal(src_shape)
        regions = regions_of(("slice_scatter", axis, start, end, step), [shape, src_shape], [shape])
        assert regions is not None
        out, hits = np.zeros(x.size), np.zeros(x.size, int)
        for g in regions:
            for o in np.ndindex(*(e for e, _, _ in g.outer)):
                so = g.src_off + sum(i * st for i, (_, st, _) in zip(o, g.outer))
                do = g.dst_off + sum(i * dt for i, (_, _, dt) in zip(o, g.outer))
                for r in range(g.n_rows):
                    for c in range(g.run):
                        out[do + r * g.dp + c] = (x, src)[g.src].ravel()[so + r * g.sp + c * g.ss]
                        hits[do + r * g.dp + c] += 1
        ref = torch.slice_scatter(torch.tensor(x), torch.tensor(src), axis, start, end, step).numpy()
        assert (hits == 1).all(), (shape, axis, start, end, step)
        np.testing.assert_array_equal(out.reshape(shape), ref)


@pytest.mark.slow
@pytest.mark.parametrize("name,form,zeros", [(n, f, False) for n in sorted(SCATTERS) for f in ("regions", "rows")]
                         + [("scatter_outer_2", f, True) for f in ("regions", "rows")])
def test_slice_scatter_on_the_cpes_matches_torch_and_its_dma_plan(tmp_path: Path, name: str, form: str, zeros: bool,
                                                                  monkeypatch: Any) -> None:
    """zeros: into a constant of zeros (the gradient of a slice), else into an input."""
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.aot.cpe_region import InterleaveOp, RegionOp, plan_copy
    from tuner.bridge.extract import torch_to_relax

    monkeypatch.setattr(cpe_ops, "plan_copy", lambda *a: plan_copy(*a, forms=(form,)))
    monkeypatch.setattr(cpe_ops, "kernel_for", lambda *a: None)  # not the generic sliced kernel either
    torch.manual_seed(1)
    shape = [2, 6, 8, 10]
    axis, *_, extent = SCATTERS[name]
    xs = [torch.randn(*shape), torch.randn(*[extent if d == axis else e for d, e in enumerate(shape)])][zeros:]
    model = _Scatter(name, zeros).eval()
    result = compile_model(torch_to_relax(model, tuple(xs)), TARGET, tmp_path / name, lambda w: None,
                           cpe_mode="all")
    rows = [r for r in result.rows if r.relax_op == "slice_scatter"]
    assert rows and {r.where for r in rows} == {"CPE (memory-bound)"}, result.rows
    (node,) = [n for n in result.graph.nodes if n.relax_op == "slice_scatter"]
    op = node.attrs["cpe"]
    assert isinstance(op, RegionOp if form == "regions" else InterleaveOp), op
    run = run_model(result.out_dir, [x.numpy() for x in xs], TARGET)
    with torch.no_grad():
        ref = model(*xs).numpy().ravel()
    np.testing.assert_array_equal(run.output, ref)
    assert {k: run.report["totals"][k] for k in op.dma_plan()} == op.dma_plan()


def test_slice_scatters_of_a_slices_gradient_win_on_the_cpes() -> None:
    """The gradients of involution's windows (examples/novel/involution.py's torch twin: slices of
    the last two axes of [8, 2, 16, 22, 22]) run on the CPEs, faster than the MPE's copy."""
    from tuner.aot.cpe_region import plan_copy
    from tuner.aot.launch_groups import phase_seconds
    from tuner.targets import get_target

    tgt = get_target(TARGET)
    slice_last = plan_copy(("strided_slice", (4,), (3,), (19,), (1,)), [(8, 2, 16, 16, 22)], [(8, 2, 16, 16, 16)],
                           tgt, 4)  # and the windows themselves: the whole-row form of a slice of the last axis
    assert slice_last is not None and slice_last.seconds + phase_seconds(tgt) < 2 * 8 * 2 * 16 * 16 * 19 * 4 / \
        tgt.mpe_copy_Bps
    for spec, src in [(("slice_scatter", 4, 3, 19, 1), (8, 2, 16, 22, 16)),
                      (("slice_scatter", 3, 6, 22, 1), (8, 2, 16, 16, 22)),
                      (("slice_scatter", 1, 0, 128, 2), (1, 64, 32, 32))]:
        full = tuple(22 if d > 2 else e for d, e in enumerate(src)) if len(src) == 5 else (1, 128, 32, 32)
        op = plan_copy(spec, [full, src], [full], tgt, 4)
        assert op is not None, spec
        assert op.ldm_bytes <= tgt.ldm_budget_bytes
        mpe = (2 * int(np.prod(full)) + int(np.prod(src))) * 4 / tgt.mpe_copy_Bps
        assert op.seconds + phase_seconds(tgt) < mpe, (spec, op.seconds, mpe)
