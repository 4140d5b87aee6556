"""Cost-model features of configs: the analysis figures plus workload-independent knob values.

Every op yields the same columns (tile knobs are summarised per role: row, col, reduction), so one
model can learn across workloads of a target and transfer to a new one. Sizes go in as log2.

The ``est_*`` columns are a roofline estimate of the busiest CPE's cycles built from the analysis alone:
main-memory lines moved at the target's *nominal* DRAM bandwidth shared by the active CPEs, the
analysis' compute cycles per step, and double buffering as overlap (a double-buffered fetch hides
behind compute, the others add to it). It is not the simulator's fitted DMA model (request latency,
per-block and read-modify-write costs are left out), so it misranks configs the machine treats
differently; but it combines the figures a tree model cannot multiply or max() by itself, which
lets the model rank regions it has not measured yet (the optimum of a large space is a small
region: register accumulators, a wide SIMD, mesh sharing together). ``est_efficiency`` puts it on
one scale across workloads (useful MAC issue over estimated cycles), which is what transfer needs.
"""

from __future__ import annotations

import numpy as np

from tuner.space.analysis import Analysis
from tuner.space.choices import Share
from tuner.space.space import ScheduleSpace

_OPS = ("conv2d", "dense", "batch_matmul")


def _log(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=np.float64), 0.0) + 1.0)


def _line_bytes(plan) -> np.ndarray:
    """Main-memory bytes a buffer's requests touch, counted in whole 128-B lines per block."""
    blocks = plan.requests * np.maximum(plan.blocks_per_request, 1.0)
    return blocks * np.ceil(np.maximum(plan.block_bytes, 1.0) / 128.0) * 128.0


def roofline(space: ScheduleSpace, a: Analysis) -> dict[str, np.ndarray]:
    """Estimated cycles of the busiest CPE: total and its parts (see the module docstring)."""
    target = space.target
    per_cpe_bw = target.mem_bandwidth_Bps / target.clock_hz / np.maximum(a.active_cpes, 1.0)  # B/cycle
    steps = np.maximum(a.steps_per_cpe, 1.0)
    dma_a = _line_bytes(a.a) / per_cpe_bw / steps
    dma_b = _line_bytes(a.b) / per_cpe_bw / steps
    put_c = _line_bytes(a.c) / per_cpe_bw
    # two output copies (db_c): every tile's put but the last overlaps the next tile's steps
    db_c = a.double_buffer_c if a.double_buffer_c is not None else np.zeros(len(steps), dtype=bool)
    put_tail = np.where(db_c, put_c / np.maximum(a.tiles_per_cpe, 1.0), put_c)
    compute = a.compute_cycles_per_step + a.share_cycles_per_step
    overlapped = (np.where(a.double_buffer_a, dma_a, 0.0) + np.where(a.double_buffer_b, dma_b, 0.0)
                  + (put_c - put_tail) / steps)
    exposed = np.where(a.double_buffer_a, 0.0, dma_a) + np.where(a.double_buffer_b, 0.0, dma_b)
    total = steps * (exposed + np.maximum(compute, overlapped)) + put_tail
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
              "put_lines", "tile_order", "inner", "unroll", "acc", "acc_in_registers", "p1_bound", "spilled",
              "valid", "est_total", "est_exposed_dma", "est_dma_excess", "est_compute", "est_put",
              "est_dma_share", "est_efficiency"]
    names += [f"op_{op}" for op in _OPS] + ["log_flops"]
    return names


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
    for role in ("row", "col", "red"):
        tile = np.ones(n)
        extent = 1.0
        for axis in space.geometry.axes:
            if axis.role == role:
                j = space.knob_index[f"tile_{axis.name}"]
                tile = tile * np.minimum(space.codes[j][index[:, j]], axis.extent)
                extent *= axis.extent
        cols += [_log(tile), tile / extent]
    for name in ("put_lines", "tile_order", "inner", "unroll", "acc"):
        j = space.knob_index[name]
        cols.append(space.codes[j][index[:, j]].astype(np.float64))
    cols += [a.compute.acc_in_registers.astype(np.float64), (a.compute.bound == 1).astype(np.float64),
             a.compute.spilled]
    cols.append(a.valid.astype(np.float64))
    est = roofline(space, a)
    total = np.maximum(est["total"], 1.0)
    cols += [_log(est["total"]), _log(est["exposed"]), _log(est["excess"]), _log(est["compute"]), _log(est["put"]),
             (est["exposed"] + est["excess"] + est["put"]) / total,
             a.macs_per_cpe / space.target.max_simd(space.workload.dtype) / total]
    cols += [np.full(n, float(space.workload.op == op)) for op in _OPS]
    cols.append(np.full(n, np.log2(space.workload.flops)))
    return np.stack(cols, axis=1).astype(np.float32)


ESTIMATE_COLUMN = feature_names().index("est_total")  # the log2 roofline estimate: the cost model's prior
