"""swDNN's published 3x3 convolution sweep, replayed with swDNN's own schedule under a profile.

swDNN v12's log (perf.1, Oct 2016, 4 core groups) times 172 shapes (B 128/256, Ni 128-384, No 128-352,
Ro = Co 16-40, K = 3); they ship as ``data/swdnn_v12_perf1_4cg.csv`` (measured columns only). Each row also
holds the log's own DMA read benchmark for that input descriptor (``dma_read_bench_GBps``, 20-27 GB/s per
core group), which is what the replay charges swDNN's transfers at: the simulator's DMA model has no term
for the 8 CPEs of a mesh row reading adjacent 128-B pieces (tuner/dma_model.py "known limits"), and the
same log measured that very pattern.

The loop nest (swDNN's core_functions.c/test.c, read, not copied; benchmarks/swdnn_schedule.py tells it in
full): one core group takes Ro/4 output rows; per output-column block of ``Costride`` columns and per
output row, the output block is zeroed, then for each of the K kernel rows the K weight slices and the
block's input pixels are fetched while the mesh GEMMs run (K per output column), and finally each output
column is put and waited on. A mesh GEMM computes each CPE's B/8 x No/8 block in 8 register-communication
steps of (B/128)(No/32) 4x4 register tiles, each a K-loop of Ni/8 iterations of 16 vector FMAs.

What the replay fits (everything else is counted from the shape). Costs of the chip, the profile's
parameters, which the simulator then uses:

- ``p0_cycles_per_fma``: cycles per vector FMA of the K-loop (the issue rate of P0);
- ``dma_wait_cycles``: each wait (every pixel, every kernel row's weights, every output column);
- ``spawn_join_s``: once per call.

Costs of swDNN's own kernel, its code terms (tuner/calibrate/model.py), reported with the fit and never
applied to the simulator's kernels:

- ``swdnn_tile_overhead_cycles``: start-up and drain of each of swDNN's 4x4 register tiles (its 16 ``vldd``
  and 16 ``vstd`` of the accumulators, its RLC start-up, the prologue and epilogue of its 2016 loop);
- ``swdnn_dma_overlap``: per kernel row, the fraction f of the shorter of (GEMMs, transfers + waits) that
  swDNN's code hides: time = C + D - f min(C, D).

Why these two are swDNN's and not the chip's: fitted to this sweep they come out at ~160 cycles per tile
and f ~ 0 (DMA added to compute), and applied to the simulator's kernels they put its best DGEMM at 0.38
of a core group's peak, where hand-written DGEMMs on the same chip measure 88.7-95% (FACTS §4, pinned by
tuner/calibrate/pins.py). The chip therefore can overlap DMA with compute and run register tiles of a
32-deep K-loop without such a start-up; swDNN's kernel does neither. How the simulator's generated kernels
fare is what a user's own hardware runs settle (``benchmarks/split_kernel.py``, ``swtune calibrate --csv``
or ``--from-log``), which fit ``block_overhead_cycles`` and ``dma_overlap`` directly.

The log's chip time is one core group's time (the four run the same rows count in parallel).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources

import numpy as np

from tuner.calibrate.model import CodeTerm
from tuner.dma_model import request_cycles
from tuner.profile import ParameterSpec
from tuner.targets import Target, get_target

KERNEL = 3  # every shape of the sweep is a 3x3 convolution
CORE_GROUPS = 4
CPES = 64
DATA = "swdnn_v12_perf1_4cg.csv"
FREE = ("p0_cycles_per_fma", "dma_wait_cycles", "spawn_join_s")
SURVEY = "conv-fidelity survey §0.3/§1.4: a 3-term fit of this sweep"
TILE_OVERHEAD = CodeTerm(ParameterSpec(
    "swdnn_tile_overhead_cycles", 0.0, 400.0, "cycles per register tile",
    "start-up and drain of one of swDNN's 4x4 register tiles (accumulator vldd/vstd, RLC start-up)",
    f"{SURVEY}: about 170-220 cycles per tile"), prior=200.0)
DMA_OVERLAP = CodeTerm(ParameterSpec(
    "swdnn_dma_overlap", 0.0, 1.0, "fraction",
    "fraction of a kernel row's transfers that swDNN's code runs under its GEMMs",
    f"{SURVEY}: 0.0 fits best, full overlap fits worse (10% RMS)"), prior=0.5)


@dataclass(frozen=True)
class SwdnnShape:
    """One measured shape of the sweep and its measured time per call (seconds, 4 core groups)."""

    batch: int
    ni: int
    no: int
    ro: int
    co: int
    costride: int
    seconds: float
    dma_gbps: float  # the log's DMA read benchmark for this input descriptor, per core group

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.ni * self.no * self.ro * self.co * KERNEL * KERNEL


def load_sweep() -> tuple[SwdnnShape, ...]:
    """The 172 shapes of swDNN's perf.1 log."""
    text = resources.files("tuner.calibrate").joinpath("data", DATA).read_text()
    rows = csv.DictReader(text.splitlines())
    return tuple(SwdnnShape(int(r["B"]), int(r["Ni"]), int(r["No"]), int(r["Ro"]), int(r["Co"]),
                            int(r["Costride"]), float(r["time_s_100calls"]) / 100, float(r["dma_read_bench_GBps"]))
                 for r in rows)


def _transfer_cycles(target: Target, op: str, block: int, blocks: int, gbps: float) -> float:
    """One request issued by all 64 CPEs together, at the measured core-group bandwidth (the model's latency
    as the floor)."""
    latency = float(request_cycles(target.dma, op, block, n_blocks=1, active_cpes=1))
    return max(latency, CPES * block * blocks / (gbps * 1e9 / target.clock_hz))


@dataclass(frozen=True)
class _Terms:
    """The replay of one shape as counts the parameters multiply (module docstring)."""

    groups: Sequence[tuple[float, float, float, float, float]]  # (fma, tiles, dma cycles, waits, times)
    fixed_cycles: float  # zeroing, output puts, the first fetch
    fixed_waits: float


def _terms(target: Target, s: SwdnnShape) -> _Terms:
    pixel = _transfer_cycles(target, "get", s.batch, s.ni // 8, s.dma_gbps)  # B bytes from each of Ni/8 rows
    weights = _transfer_cycles(target, "get", s.ni, s.no // 8, s.dma_gbps)
    column = _transfer_cycles(target, "put", s.batch, s.no // 8, s.dma_gbps)
    tiles = 8 * (s.batch // 128) * (s.no // 32)  # register tiles of one mesh GEMM, per CPE
    fma = tiles * (s.ni // 8) * 16  # vector FMAs of one mesh GEMM, per CPE
    rows, ci = s.ro // CORE_GROUPS, s.co + KERNEL - 1
    groups, fixed, waits = [], KERNEL * weights + pixel, 2.0
    for start in range(0, s.co, s.costride):
        width = min(start + s.costride, s.co) - start
        pixels = min(start + s.costride + KERNEL, ci) - start  # swDNN: CiEnd = CoStart + Costride + K
        gemms = KERNEL * width  # per kernel row: each output column takes K kernel columns
        groups.append((gemms * fma, gemms * tiles, KERNEL * weights + pixels * pixel, pixels + 1.0,
                       float(rows * KERNEL)))
        fixed += rows * (s.batch * s.no * width / 256 + width * column)  # zero (4 doubles a store), puts
        waits += rows * width
    return _Terms(groups, fixed, waits)


class SwdnnReplay:
    """:class:`~tuner.calibrate.model.TimeModel` of the sweep: swDNN's schedule replayed under a profile."""

    name = "swdnn_v12_perf1 replay"
    free = FREE
    code_terms = (TILE_OVERHEAD, DMA_OVERLAP)

    def __init__(self, target: Target | str = "sw26010", shapes: Sequence[SwdnnShape] | None = None) -> None:
        self.target = get_target(target)
        self.shapes = tuple(load_sweep() if shapes is None else shapes)

    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        cols: dict[str, list[float]] = {k: [] for k in ("shape", "fma", "tiles", "dma", "waits", "times")}
        fixed, fixed_waits = [], []
        for i, s in enumerate(self.shapes):
            terms = _terms(self.target, s)
            for g in terms.groups:
                for key, v in zip(("fma", "tiles", "dma", "waits", "times"), g, strict=True):
                    cols[key].append(v)
                cols["shape"].append(i)
            fixed.append(terms.fixed_cycles)
            fixed_waits.append(terms.fixed_waits)
        out = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
        out["shape"] = out["shape"].astype(int)
        out["fixed"], out["fixed_waits"] = np.asarray(fixed), np.asarray(fixed_waits)
        return out

    @property
    def measured(self) -> np.ndarray:
        return np.array([s.seconds for s in self.shapes])

    def predict(self, values: Mapping[str, float]) -> np.ndarray:
        a = self._arrays
        wait, f = values["dma_wait_cycles"], values[DMA_OVERLAP.name]
        compute = a["fma"] * values["p0_cycles_per_fma"] + a["tiles"] * values[TILE_OVERHEAD.name]
        transfer = a["dma"] + a["waits"] * wait
        per_group = a["times"] * (compute + transfer - f * np.minimum(compute, transfer))
        cycles = np.bincount(a["shape"], per_group, minlength=len(self.shapes)) + a["fixed"] + a["fixed_waits"] * wait
        return cycles / self.target.clock_hz + values["spawn_join_s"]

    @staticmethod
    def with_profile_code_costs(values: Mapping[str, float]) -> dict[str, float]:
        """``values`` with swDNN's code terms set to what the profile charges the generated kernels for the
        same things (``block_overhead_cycles`` per register tile, ``dma_overlap``): swDNN's schedule as if
        its loop were as well built as the profile assumes ours is."""
        return {**values, TILE_OVERHEAD.name: values["block_overhead_cycles"], DMA_OVERLAP.name: values["dma_overlap"]}

    def subset(self, indices: Sequence[int] | np.ndarray) -> SwdnnReplay:
        return SwdnnReplay(self.target, [self.shapes[int(i)] for i in indices])

    def peak_fractions(self, values: Mapping[str, float]) -> np.ndarray:
        """Modelled fraction of the 4 core groups' float64 peak, per shape."""
        flops = np.array([s.flops for s in self.shapes])
        return flops / self.predict(values) / (CORE_GROUPS * self.target.peak_flops("float64"))
