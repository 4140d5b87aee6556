"""A calibrated performance model of one Sunway core group, used as a measurement backend.

On a target of several core groups a kernel's time is its busiest CG's, plus what the split adds
(tuner/space/chip.py: the other CGs' launch, operands read across the chip, replicas, partial sums).

Time of a kernel = spawn/join + the busiest CPE's time (+ host-side padding of a conv input).
The busiest CPE walks its output tiles; per (tile, reduction chunk) step it waits for the DMA of the
operands it does not double-buffer, then for max(compute, DMA of the double-buffered ones) -- the
double-buffered fetch of the next chunk overlaps this chunk's compute. After the last chunk it puts
the output tile: waited on at once, or (``db_c``, two LDM copies of the tile) asynchronously, the
put sharing the DMA lane with the next tile's double-buffered gets. DMA times come from the fitted
request model (``tuner.dma_model``) with the bandwidth shared by every active CPE; compute
comes from the analysis (the two CPE pipes, the register blocking, packing, horizontal reductions);
sharing tiles over the mesh adds register-communication (RLC) or RMA latency. Deterministic for a
seed; multiplicative lognormal noise per repeat (default ``DEFAULT_NOISE``, see tuner/measure/noise.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tuner.dma_model import request_cycles
from tuner.measure.base import MeasureResult, Source, Status
from tuner.measure.noise import DEFAULT_NOISE, noise_factors
from tuner.profile import DEFAULT_VERSION, Profile
from tuner.space.analysis import Analysis, BufferPlan
from tuner.space.chip import chip_seconds, cross_factor
from tuner.space.choices import Reason
from tuner.space.compute import PipeBound
from tuner.space.epilogue import RESIDUAL_CYCLES_PER_ELEMENT
from tuner.space.factory import space_for
from tuner.space.space import Config, ScheduleSpace, config_hash
from tuner.targets import Target, get_target
from tuner.task_kind import Factors, kind_of
from tuner.workloads import Workload


def dma_time(target: Target | str, op: str, block_bytes: float, n_blocks: float = 1, gap_bytes: float = 0,
             active_cpes: float = 64, host_offset: float = 0) -> float:
    """Modelled seconds for one DMA request of ``n_blocks`` blocks of ``block_bytes`` (gap between
    blocks ``gap_bytes``) issued at the same time by ``active_cpes`` CPEs. ``op`` is "get" or "put"."""
    tgt = get_target(target)
    cycles = request_cycles(tgt.dma, op, block_bytes, n_blocks=n_blocks, gap_bytes=gap_bytes,
                            active_cpes=active_cpes, host_offset=host_offset)
    return float(cycles) / tgt.clock_hz


def _transfer_cycles(target: Target, op: str, plan: BufferPlan, active: np.ndarray) -> np.ndarray:
    """Cycles the busiest CPE spends on all its requests for one buffer."""
    per_request = request_cycles(
        target.dma, op,
        np.maximum(plan.block_bytes, 1.0),
        n_blocks=np.maximum(plan.blocks_per_request, 1.0),
        gap_bytes=0.0,
        active_cpes=np.maximum(active, 1.0),
        host_offset=np.where(plan.aligned, 0.0, 4.0),
    )
    return plan.requests * per_request


def epilogue_cycles(target: Target, a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """(DMA cycles, compute cycles) the epilogue adds to the busiest CPE: zeros without one. The gets
    of a tile's operand are issued when the tile starts and waited on at its put (tuner.aot.fusion), so
    ``kernel_cycles`` overlaps them with the tile's compute like a double-buffered fetch."""
    ep = a.epilogue
    if ep is None:
        z = np.zeros(len(a.valid))
        return z, z
    return _transfer_cycles(target, "get", ep.get, a.active_cpes), ep.elements * RESIDUAL_CYCLES_PER_ELEMENT


def kernel_cycles(target: Target, a: Analysis) -> dict[str, np.ndarray]:
    """Cycle breakdown of the busiest CPE (arrays over configs).

    ``total`` = ``p0_compute`` (FMA issue on P0) + ``p1_traffic`` (inner-loop cycles beyond P0 issue:
    LDM loads/stores, integer work or the accumulator chain) + ``loop_overhead`` (register-block
    entries, lane reductions, accumulator flushes, packing) + ``share`` (RLC/RMA not hidden) +
    ``dma_hidden_excess`` (double-buffered DMA, and with ``db_c`` the previous tile's put, longer than
    the compute it overlaps) + ``exposed_dma`` (DMA nothing overlaps) + ``put_c`` (puts waited on:
    every tile's, or with ``db_c`` only the last tile's) + ``tile_overhead``. ``pipe_bound`` is the PipeBound of the
    inner loop.
    """
    steps = np.maximum(a.steps_per_cpe, 1.0)
    get_a = _transfer_cycles(target, "get", a.a, a.active_cpes)
    get_b = _transfer_cycles(target, "get", a.b, a.active_cpes)
    if a.chip is not None:  # an operand read from another core group's memory (tuner/space/chip.py)
        factor = cross_factor(target, a.chip.cgs)
        get_a = np.where(a.chip.cross_a, get_a * factor + a.a.requests * target.cross_request_cycles, get_a)
        get_b = np.where(a.chip.cross_b, get_b * factor + a.b.requests * target.cross_request_cycles, get_b)
    put_c = _transfer_cycles(target, "put", a.c, a.active_cpes)
    dma_a_step, dma_b_step = get_a / steps, get_b / steps
    db_c = a.double_buffer_c if a.double_buffer_c is not None else np.zeros(len(steps), dtype=bool)
    # With two output copies a tile's put runs on the CPE's DMA lane during the next tile's steps,
    # beside that tile's double-buffered gets (same lane, same bandwidth share); the last tile's put
    # has nothing after it. With one copy the put is waited on before the tile's copy is reused.
    n_tiles = np.maximum(a.tiles_per_cpe, 1.0)
    put_tail = np.where(db_c, put_c / n_tiles, put_c)
    put_hidden_step = np.where(db_c, put_c - put_tail, 0.0) / steps
    # a fused residual operand (tuner/space/epilogue.py): fetched under its tile's steps, on the same lane
    ep_dma, ep_work = epilogue_cycles(target, a)
    ep_step = ep_dma / steps
    overlapped = (np.where(a.double_buffer_a, dma_a_step, 0.0) + np.where(a.double_buffer_b, dma_b_step, 0.0)
                  + put_hidden_step + ep_step)
    exposed = np.where(a.double_buffer_a, 0.0, dma_a_step) + np.where(a.double_buffer_b, 0.0, dma_b_step)
    compute = a.compute_cycles_per_step + a.share_cycles_per_step
    # Only the profile's fraction ``dma_overlap`` of the double-buffered transfers runs under compute
    # (1: all of it, the double-buffering ideal; 0: transfers add to compute, as swDNN's timings fit);
    # every step also waits once for its transfers (``dma_wait_cycles``: the reply-word poll).
    f = target.dma_overlap
    step = exposed + (1.0 - f) * overlapped + np.maximum(compute, f * overlapped) + target.dma_wait_cycles
    # the first double-buffered fetch has nothing to hide behind (the first tile's residual has its compute)
    prologue = overlapped - put_hidden_step - ep_step
    tiles = a.tiles_per_cpe * (target.tile_overhead_cycles + target.dma_wait_cycles)  # and its put's wait
    total = steps * step + put_tail + tiles + prologue + ep_work
    cp = a.compute
    return {"total": total, "get_a": get_a, "get_b": get_b, "put_c": put_tail,
            "compute": steps * compute, "exposed_dma": steps * exposed + prologue,
            "p0_compute": steps * cp.p0_cycles, "p1_traffic": steps * cp.loop_extra_cycles + ep_work,
            "loop_overhead": steps * cp.overhead_cycles, "share": steps * a.share_cycles_per_step,
            "dma_hidden_excess": steps * ((1.0 - f) * overlapped + np.maximum(0.0, f * overlapped - compute)
                                          + target.dma_wait_cycles), "tile_overhead": tiles,
            "pipe_bound": cp.bound}


def breakdown(space: ScheduleSpace, config: Config) -> dict[str, object]:
    """Where one config's modelled time goes, in seconds (and shares of the total) with the binding pipe."""
    index = space.encode(config)[None, :]
    a = space.analyze(index)
    target = space.target
    parts = kernel_cycles(target, a)
    seconds = {k: float(parts[k][0]) / target.clock_hz for k in
               ("p0_compute", "p1_traffic", "loop_overhead", "share", "dma_hidden_excess", "exposed_dma", "put_c",
                "tile_overhead")}
    seconds["spawn_join"] = target.spawn_join_s
    seconds["host_prepass"] = space.geometry.prepass_bytes / target.mpe_copy_Bps
    if a.host_pack_bytes is not None:
        seconds["host_prepass"] += float(a.host_pack_bytes[0]) / target.mpe_copy_Bps
    if a.chip is not None:
        seconds["cross_cg"] = float(chip_seconds(target, a.chip)[0])
    total = float(simulate(space, index, a)[0])
    return {"seconds": seconds, "share_of_total": {k: v / total for k, v in seconds.items()},
            "total_s": total, "pipe_bound": PipeBound(int(parts["pipe_bound"][0])).name,
            "register_block": int(a.compute.register_block[0]),
            "acc_in_registers": bool(a.compute.acc_in_registers[0]),
            "kernel_efficiency": float(a.kernel_efficiency[0])}


def simulate(space: ScheduleSpace, index: np.ndarray, analysis: Analysis | None = None) -> np.ndarray:
    """Noise-free modelled kernel seconds for each config row; ``inf`` for invalid configs."""
    a = analysis if analysis is not None else space.analyze(index)
    target = space.target
    cycles = kernel_cycles(target, a)["total"]
    seconds = target.spawn_join_s + cycles / target.clock_hz
    seconds = seconds + space.geometry.prepass_bytes / target.mpe_copy_Bps
    if a.host_pack_bytes is not None:  # packing a non-constant operand on the host, before the spawn
        seconds = seconds + a.host_pack_bytes / target.mpe_copy_Bps
    if a.chip is not None:  # launching the other core groups, replicas, a split reduction's last pass
        seconds = seconds + chip_seconds(target, a.chip)
    return np.where(a.valid, seconds, np.inf)


class Simulator:
    """Measurement backend over the model. ``noise`` is the relative std-dev of each repeat
    (lognormal, mean 1; default :data:`tuner.measure.noise.DEFAULT_NOISE`). ``profile`` sets the
    target's uncertain costs (tuner/profile.py); without one the target preset's own values are used,
    which is the built-in profile, version 0. Each result's details name the profile version."""

    source = Source.SIMULATOR
    # Microseconds per config: a worker measures 16 per call, so a stop request waits for 16 at most.
    chunk = 16

    def __init__(self, noise: float = DEFAULT_NOISE, repeats: int = 3, seed: int = 0,
                 profile: Profile | None = None) -> None:
        if noise < 0 or repeats < 1:
            raise ValueError("noise must be >= 0 and repeats >= 1")
        self.noise, self.repeats, self.seed, self.profile = noise, repeats, seed, profile
        self._spaces: dict[tuple[str, str], Any] = {}

    @property
    def profile_version(self) -> int:
        return self.profile.version if self.profile is not None else DEFAULT_VERSION

    def space(self, workload: Workload, target: Target) -> Any:
        # one Simulator holds one profile, so the target's name is a sufficient key
        key = (workload.key, target.name)
        if key not in self._spaces:
            self._spaces[key] = space_for(workload, target)
        return self._spaces[key]

    def preflight(self) -> None:
        """Nothing to check: the model runs wherever numpy does."""

    def _rng(self, workload: Workload, config: Config) -> np.random.Generator:
        # Seeded by (seed, workload, config): a config measures the same whatever batch it is in.
        digest = hashlib.sha1(f"{self.seed}:{workload.key}:{config_hash(config)}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        target = self.profile.apply(target) if self.profile is not None else get_target(target)
        space = self.space(workload, target)
        def factors(config: Config) -> np.ndarray:
            if self.noise <= 0:  # noise-free: no per-config generator to seed (a calibration fit's hot path)
                return np.ones(self.repeats)
            return noise_factors(self._rng(workload, config), self.noise, self.repeats)

        results = kind_of(workload).simulate(space, configs, factors, self.source)
        for r in results:
            r.details["profile_version"] = self.profile_version
        return results


def measure_schedule(space: ScheduleSpace, configs: Sequence[Config], factors: Factors,
                     source: Source = Source.SIMULATOR) -> list[MeasureResult]:
    """Simulated results of configs of a GEMM-like schedule space (one analysis of the whole batch):
    a config outside the space or over the LDM is a failed result, never an exception."""
    target = space.target
    results: list[MeasureResult | None] = [None] * len(configs)
    rows: list[np.ndarray] = []
    positions: list[int] = []
    for i, config in enumerate(configs):
        try:
            rows.append(space.encode(config))
            positions.append(i)
        except ValueError as exc:
            results[i] = MeasureResult(config=dict(config), status=Status.INVALID_CONFIG, error=str(exc),
                                       source=source)
    if rows:
        index = np.stack(rows)
        analysis = space.analyze(index)
        seconds = simulate(space, index, analysis)
        for row, i in enumerate(positions):
            config = dict(configs[i])
            if not analysis.valid[row]:
                reason = Reason(int(analysis.reason[row]))
                status = Status.LDM_OVERFLOW if reason is Reason.LDM_OVERFLOW else Status.INVALID_CONFIG
                results[i] = MeasureResult(
                    config=config, status=status, source=source,
                    error=f"{reason.label}: LDM {int(analysis.ldm_total[row])} B, "
                          f"budget {target.ldm_budget_bytes} B",
                )
                continue
            base = float(seconds[row])
            results[i] = MeasureResult(
                config=config, status=Status.OK, times=tuple(float(base * f) for f in factors(config)),
                source=source, details={"model_seconds": base, "ldm_bytes": int(analysis.ldm_total[row])},
            )
    return [r for r in results if r is not None]
