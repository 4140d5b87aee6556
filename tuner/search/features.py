"""Cost-model features of configs: the analysis figures plus workload-independent knob values.

Every op yields the same columns (tile knobs are summarised per role: row, col, reduction), so one
model can learn across workloads of a target and transfer to a new one. Sizes go in as log2. What
sets one operator apart from another enters as figures of its geometry (``operator_columns``:
operands, untiled reduction, grouped index, constant weights, padding pass, arithmetic intensity),
never as the operator's name, so a model trained on convs and GEMMs ranks a new expression operator
by what it is.

The ``est_*`` columns are a roofline estimate of the busiest CPE's cycles built from the analysis alone:
main-memory lines moved at the target's *nominal* DRAM bandwidth shared by the active CPEs, the
analysis' compute cycles per step, and double buffering as overlap (a double-buffered fetch hides
behind compute, the others add to it). It is not the simulator's fitted DMA model (request latency,
per-block and read-modify-write costs are left out), so it misranks configs the machine treats
differently; but it combines the figures a tree model cannot multiply or max() by itself, which
lets the model rank regions it has not measured yet (the optimum of a large space is a small
region: register accumulators, a wide SIMD, mesh sharing together). ``est_efficiency`` puts it on
one scale across workloads (useful MAC issue over estimated cycles), which is what transfer needs.

The ``sus_*`` columns are the same roofline with the *sustained* DMA rates of FACTS.md instead of the
nominal bandwidth: the core group's measured plateau (bytes per cycle) and its fixed service per DMA
block (cycles), both shared by the active CPEs. Two figures per target and direction, taken from the
published measurement fits, not from the simulator's DMA model or any per-config simulated time: they
charge what the nominal estimate misses most, many small requests and a busy memory channel.

On a target of several core groups the analysis' figures are the busiest CG's; both rooflines add what
the split costs (tuner/space/chip.py: the slower cross reads, launch, replicas, partial sums), so the
split enters the model through the same columns and a one-CG config's features are what they were.
"""

from __future__ import annotations

import numpy as np

from tuner.space.analysis import Analysis
from tuner.space.chip import chip_seconds, cross_factor
from tuner.space.choices import Share
from tuner.space.space import ScheduleSpace
from tuner.targets import SustainedDma

_ROLES = ("row", "col", "red")


def _log(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=np.float64), 0.0) + 1.0)


def _line_bytes(plan) -> np.ndarray:
    """Main-memory bytes a buffer's requests touch, counted in whole 128-B lines per block."""
    blocks = plan.requests * np.maximum(plan.blocks_per_request, 1.0)
    return blocks * np.ceil(np.maximum(plan.block_bytes, 1.0) / 128.0) * 128.0


def roofline(space: ScheduleSpace, a: Analysis, sustained: bool = False) -> dict[str, np.ndarray]:
    """Estimated cycles of the busiest CPE: total and its parts (see the module docstring).

    ``sustained``: DMA at the target's measured plateau and per-block service (``Target.sustained_dma``),
    else at the nominal DRAM bandwidth with no per-request cost."""
    target = space.target
    active = np.maximum(a.active_cpes, 1.0)
    nominal = target.mem_bandwidth_Bps / target.clock_hz  # B/cycle of the core group
    rates = target.sustained_dma if sustained else SustainedDma(
        get_bw=nominal, get_block_cycles=0.0, put_bw=nominal, put_block_cycles=0.0)

    def dma(plan, bw: float, block_cycles: float) -> np.ndarray:  # cycles of the busiest CPE
        blocks = plan.requests * np.maximum(plan.blocks_per_request, 1.0)
        return (_line_bytes(plan) / bw + blocks * block_cycles) * active

    steps = np.maximum(a.steps_per_cpe, 1.0)
    dma_a = dma(a.a, rates.get_bw, rates.get_block_cycles) / steps
    dma_b = dma(a.b, rates.get_bw, rates.get_block_cycles) / steps
    split = np.zeros(len(steps))
    if a.chip is not None:
        factor = cross_factor(target, a.chip.cgs)
        dma_a = np.where(a.chip.cross_a, dma_a * factor, dma_a)
        dma_b = np.where(a.chip.cross_b, dma_b * factor, dma_b)
        split = chip_seconds(target, a.chip) * target.clock_hz
    put_c = dma(a.c, rates.put_bw, rates.put_block_cycles)
    # two output copies (db_c): every tile's put but the last overlaps the next tile's steps
    db_c = a.double_buffer_c if a.double_buffer_c is not None else np.zeros(len(steps), dtype=bool)
    put_tail = np.where(db_c, put_c / np.maximum(a.tiles_per_cpe, 1.0), put_c)
    compute = a.compute_cycles_per_step + a.share_cycles_per_step
    overlapped = (np.where(a.double_buffer_a, dma_a, 0.0) + np.where(a.double_buffer_b, dma_b, 0.0)
                  + (put_c - put_tail) / steps)
    exposed = np.where(a.double_buffer_a, 0.0, dma_a) + np.where(a.double_buffer_b, 0.0, dma_b)
    total = steps * (exposed + np.maximum(compute, overlapped)) + put_tail + split
    return {"total": total, "exposed": steps * exposed, "excess": steps * np.maximum(overlapped - compute, 0.0),
            "compute": steps * compute, "put": put_tail}


def feature_names() -> list[str]:
    names = ["ldm_a", "ldm_b", "ldm_c", "ldm_pack", "ldm_fill"]
    for buf in ("a", "b", "c"):
        names += [f"{buf}_requests", f"{buf}_bytes", f"{buf}_block", f"{buf}_blocks_per_req", f"{buf}_aligned"]
    names += ["active_cpes", "tiles", "steps", "chunks", "imbalance", "macs", "simd", "simd_fraction",
              "kernel_eff", "compute_step", "share_step", "db_a", "db_b", "share_none", "share_bcast", "share_mesh",
              "dma_rows", "intensity", "dma_per_compute_a", "dma_per_compute_b", "pr", "pc",
              "row_tile", "row_fraction", "col_tile", "col_fraction", "red_tile", "red_fraction",
              "put_lines", "tile_order", "unroll", "acc", "inner_role", "acc_in_registers", "p1_bound", "spilled",
              "valid", "est_total", "est_exposed_dma", "est_dma_excess", "est_compute", "est_put",
              "est_dma_share", "est_efficiency", "sus_total", "sus_exposed_dma", "sus_dma_excess", "sus_put",
              "sus_dma_share", "sus_efficiency"]
    names += [f"op_{name}" for name in _OPERATOR_COLUMNS] + ["log_flops"]
    return names


_OPERATOR_COLUMNS = ("operands", "spatial_axes", "reduce_axes", "red_fixed", "grouped", "b_constant", "prepass",
                     "intensity", "ops_per_point", "fma_per_point")


def operator_columns(space: ScheduleSpace) -> tuple[float, ...]:
    """The operator's own figures, the same for every config of a workload (``_OPERATOR_COLUMNS``):
    what the expression and its spec say, not which operator it is."""
    g = space.geometry
    w = space.workload
    tensor_bytes = (sum(op.access.elements for op in g.operands) + g.expr.output.elements) * w.dtype_bytes
    return (float(len(g.operands)), float(len(g.expr.spatial)), float(len(g.expr.reduce)),
            float(np.log2(g.red_fixed)), float(bool(g.index_div)), float(g.b_constant),
            float(np.log2(1.0 + g.prepass_bytes / tensor_bytes)), float(np.log2(w.flops / tensor_bytes)),
            float(g.ops_per_point), float(g.fma_per_point))


def features(space: ScheduleSpace, index: np.ndarray, analysis: Analysis | None = None) -> np.ndarray:
    """Feature matrix (n_configs x len(feature_names())) for index rows of ``space``."""
    index = np.atleast_2d(index)
    a = analysis if analysis is not None else space.analyze(index)
    n = len(index)
    budget = space.target.ldm_budget_bytes
    cols: list[np.ndarray] = [_log(a.ldm_a), _log(a.ldm_b), _log(a.ldm_c), _log(a.ldm_pack), a.ldm_total / budget]
    for plan in (a.a, a.b, a.c):
        cols += [_log(plan.requests), _log(plan.bytes), _log(plan.block_bytes), _log(plan.blocks_per_request),
                 plan.aligned.astype(np.float64)]
    compute = np.maximum(a.compute_cycles_per_step, 1.0)
    steps = np.maximum(a.steps_per_cpe, 1.0)
    cols += [a.active_cpes / space.target.cpes, _log(a.tiles_per_cpe), _log(a.steps_per_cpe), _log(a.chunks_per_tile),
             a.imbalance, _log(a.macs_per_cpe), a.simd_width / space.target.max_simd(space.workload.dtype),
             a.simd_fraction, a.kernel_efficiency, _log(a.compute_cycles_per_step), _log(a.share_cycles_per_step),
             a.double_buffer_a.astype(np.float64), a.double_buffer_b.astype(np.float64),
             *((a.share_mode == mode).astype(np.float64) for mode in Share), a.dma_mode.astype(np.float64),
             _log(a.arithmetic_intensity),
             _log(a.a.bytes / steps / compute), _log(a.b.bytes / steps / compute), _log(a.pr), _log(a.pc)]
    for role in _ROLES:
        tile = np.ones(n)
        extent = 1.0
        for axis in space.geometry.axes:
            if axis.role == role:
                j = space.knob_index[f"tile_{axis.name}"]
                tile = tile * np.minimum(space.codes[j][index[:, j]], axis.extent)
                extent *= axis.extent
        cols += [_log(tile), tile / extent]
    for name in ("put_lines", "tile_order", "unroll", "acc"):
        j = space.knob_index[name]
        cols.append(space.codes[j][index[:, j]].astype(np.float64))
    # the innermost loop by its axis' role, not by its place in the operator's own list of choices
    j = space.knob_index["inner"]
    role_of = {axis.name: _ROLES.index(axis.role) for axis in space.geometry.axes}
    cols.append(np.array([role_of[name] for name in space.knobs[j].choices], dtype=np.float64)[index[:, j]])
    cols += [a.compute.acc_in_registers.astype(np.float64), (a.compute.bound == 1).astype(np.float64),
             a.compute.spilled]
    cols.append(a.valid.astype(np.float64))
    est = roofline(space, a)
    total = np.maximum(est["total"], 1.0)
    cols += [_log(est["total"]), _log(est["exposed"]), _log(est["excess"]), _log(est["compute"]), _log(est["put"]),
             (est["exposed"] + est["excess"] + est["put"]) / total,
             a.macs_per_cpe / space.target.max_simd(space.workload.dtype) / total]
    sus = roofline(space, a, sustained=True)
    sus_total = np.maximum(sus["total"], 1.0)
    cols += [_log(sus["total"]), _log(sus["exposed"]), _log(sus["excess"]), _log(sus["put"]),
             (sus["exposed"] + sus["excess"] + sus["put"]) / sus_total,
             a.macs_per_cpe / space.target.max_simd(space.workload.dtype) / sus_total]
    cols += [np.full(n, value) for value in operator_columns(space)]
    cols.append(np.full(n, np.log2(space.workload.flops)))
    return np.stack(cols, axis=1).astype(np.float32)


ESTIMATE_COLUMN = feature_names().index("est_total")  # the log2 roofline estimate at nominal bandwidth
SUSTAINED_COLUMN = feature_names().index("sus_total")  # the same at the sustained DMA rates
