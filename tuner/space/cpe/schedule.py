"""The schedule space of a memory-bound CPE kernel (tuner.aot.cpe_ops) and its vectorised analysis.

A kernel cuts its operator into ``lead * ext / block`` blocks along one output axis. Its knobs:

* ``block``: output indices per block along the axis (a divisor of the extent). It fixes the bytes
  of every DMA request (a sliced operand's block is one contiguous range) and the LDM it needs.
* ``db``: double-buffered gets. The sliced inputs get two LDM copies; while block i is computed and
  put, block i+1's gets are already in flight (its own reply counter per copy).
* ``active``: CPEs that take blocks (round-robin). Fewer CPEs contend less for the DMA engine but
  each takes more blocks. On a target of several core groups (``Target.cgs``) ``active`` counts CPEs
  over the chip: above 64 the blocks spread over ``active / 64`` CGs, each streaming its blocks from
  its own memory at its own rates (the CGs' launch, ``Target.cg_launch_s``, is added; tuner/space/chip.py).

SIMD lanes are the fourth knob (tuner.space.cpe.plan): a block's body is TVM's legalized PrimFunc printed
as C (tuner.ir.cprint.legalized, vector loops by tuner.ir.cprint.legalized_simd), counted at the lanes
it is printed with.

``analyse`` evaluates every configuration at once (numpy arrays): LDM bytes and validity with a named
reason (Why), the DMA requests and bytes of one run (what the emulator counts), the DMA seconds of
the busiest CPE from the fitted DMA model (tuner.dma_model.request_cycles, the model behind
tuner.measure.simulator.dma_time), the body's compute from its operation counts per block at the
Target's scalar CPE costs (one cycle per arithmetic op, load and store, ``cpe_transcendental_cycles``
per exp/div-like call: the same charge as before this space), and spawn/join. The configuration
with the least simulated time is the kernel's schedule when the tuning log has none; as a tuning task
(tuner.kinds.cpe_kernel) every configuration is measured like a GEMM-like kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from tuner.dma_model import request_cycles
from tuner.targets import Target

CPES = 64  # CPEs of a core group (Target.cpes on both targets)
ACTIVE_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # plus the block count itself when it is below 64
DB_CHOICES = (False, True)


class Why(str, Enum):
    """Whether a configuration can run, and if not why."""

    OK = "ok"
    LDM = "ldm"  # operand blocks (inputs doubled with db), whole operands and scratch exceed the budget
    BLOCK = "block"  # the block size does not divide the cut's extent, or its operand blocks alone overflow
    IDLE_CPES = "idle_cpes"  # more active CPEs than blocks: the same schedule as fewer CPEs
    NO_BODY = "no_body"  # the operator does not legalize on blocks of this size
    CHIP = "chip"  # more CPEs than the target's core groups hold


@dataclass(frozen=True)
class Window:
    """A sliced input read through a window along the axis (a pool's rows with their halo): block
    ``j`` of ``b`` output rows reads input rows ``[j*b*stride - pad, ... + (b-1)*stride + span)``,
    clipped to ``[0, ext)`` (rows outside are filled in LDM, not fetched)."""

    stride: int
    span: int  # input rows one output row reads: (kernel - 1) * dilation + 1
    pad: int  # padding rows before the first input row
    ext: int  # input rows

    def rows(self, b: np.ndarray) -> np.ndarray:
        return (b - 1) * self.stride + self.span

    def fetched_rows(self, b: int, nj: int) -> np.ndarray:
        """Input rows each of the ``nj`` blocks along the axis actually gets (clipped window)."""
        r0 = np.arange(nj) * b * self.stride - self.pad
        return np.minimum(r0 + self.rows(np.asarray(b)), self.ext) - np.maximum(r0, 0)


@dataclass(frozen=True)
class Operand:
    """One kernel parameter: an input or an output, sliced along the axis or fetched whole."""

    is_input: bool
    sliced: bool
    inner: int  # elements per index along the axis (sliced); all its elements (whole)
    window: Window | None = None  # a sliced input read through a halo window
    # False: a block of ``inner`` elements per leading index, the same for every block along the axis
    # (a [N, G, 1] mean of an [N, G, L] output cut along L)
    along: bool = True

    def elems(self, b: np.ndarray) -> np.ndarray:
        """Elements held in LDM for blocks of ``b`` (one copy)."""
        if not self.sliced or not self.along:
            return np.full(np.shape(b), self.inner)
        rows = self.window.rows(b) if self.window is not None else b
        return rows * self.inner


@dataclass
class Space:
    """Every configuration of one kernel and its analysis (arrays of one length)."""

    block: np.ndarray
    db: np.ndarray
    active: np.ndarray
    blocks: np.ndarray
    per_cpe: np.ndarray  # blocks of the busiest CPE
    ldm_bytes: np.ndarray
    why: np.ndarray  # Why values
    get_reqs: np.ndarray
    get_bytes: np.ndarray
    put_reqs: np.ndarray
    put_bytes: np.ndarray
    dma_s: np.ndarray  # DMA of the busiest CPE (all its requests, overlapped or not)
    compute_s: np.ndarray  # the body on the busiest CPE's blocks
    seconds: np.ndarray  # simulated kernel time
    exact: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # body counted at this size

    def __len__(self) -> int:
        return len(self.block)

    def best(self) -> int:
        """The valid configuration with the least simulated time (-1: none)."""
        ok = self.why == Why.OK.value
        if not ok.any():
            return -1
        return int(np.flatnonzero(ok)[np.argmin(self.seconds[ok])])

    def dma(self, i: int) -> dict[str, int]:
        return {"get_reqs": int(self.get_reqs[i]), "get_bytes": int(self.get_bytes[i]),
                "put_reqs": int(self.put_reqs[i]), "put_bytes": int(self.put_bytes[i])}


def chip_actives(cgs: int) -> tuple[int, ...]:
    """The ``active`` choices above one CG's 64 CPEs: every CPE of 2 to ``cgs`` core groups."""
    return tuple(CPES * c for c in range(2, cgs + 1))


def configs(lead: int, ext: int, sizes: list[int], cgs: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(block, db, active) of every configuration over the block sizes ``sizes`` (divisors of ext), on
    up to ``cgs`` core groups."""
    rows = []
    for b in sizes:
        n = lead * (ext // b)
        actives = sorted({a for a in ACTIVE_CHOICES if a <= CPES} | {min(CPES, n)}
                         | {a for a in chip_actives(cgs) if a - CPES < n})
        rows += [(b, db, a) for db in DB_CHOICES for a in actives]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0], arr[:, 1].astype(bool), arr[:, 2]


def dma_counts(lead: int, ext: int, operands: list[Operand], item: int, block: np.ndarray,
               active: np.ndarray) -> dict[str, np.ndarray]:
    """DMA requests and bytes of one run of the kernel (what the emulator counts): each active CPE
    gets the whole operands once, then every block gets its sliced inputs and puts its outputs."""
    block = np.asarray(block, dtype=np.int64)
    blocks = lead * (ext // block)
    gets = np.zeros(block.shape, dtype=np.int64)
    get_bytes = np.zeros(block.shape, dtype=np.int64)
    puts = np.zeros(block.shape, dtype=np.int64)
    put_bytes = np.zeros(block.shape, dtype=np.int64)
    for p in operands:
        if p.is_input and not p.sliced:
            gets += active
            get_bytes += active * p.inner * item
        elif p.is_input and p.window is not None:
            win = p.window
            fetched = {b: win.fetched_rows(b, ext // b) for b in np.unique(block).tolist()}
            per_b = np.array([lead * int((fetched[b] > 0).sum()) for b in block.tolist()], dtype=np.int64)
            rows_b = np.array([lead * int(np.maximum(fetched[b], 0).sum()) for b in block.tolist()], dtype=np.int64)
            gets += per_b
            get_bytes += rows_b * p.inner * item
        elif p.is_input:
            gets += blocks
            get_bytes += blocks * (block if p.along else 1) * p.inner * item
        else:
            puts += blocks
            put_bytes += blocks * block * p.inner * item
    return {"get_reqs": gets, "get_bytes": get_bytes, "put_reqs": puts, "put_bytes": put_bytes}


def analyse(target: Target, item: int, lead: int, ext: int, operands: list[Operand], sizes: list[int],
            body_cycles: dict[int, float], scratch_bytes: dict[int, int], exact: set[int] | None = None,
            no_body: set[int] = frozenset()) -> Space:  # type: ignore[assignment]
    """Every configuration over block sizes ``sizes``; ``body_cycles[b]`` / ``scratch_bytes[b]``: one
    block's compute cycles and LDM scratch at size ``b`` (``exact``: counted on the body legalized at
    that size, else predicted); sizes in ``no_body`` do not legalize."""
    block, db, active = configs(lead, ext, sizes)
    return analyse_configs(target, item, lead, ext, operands, block, db, active, body_cycles, scratch_bytes,
                           exact if exact is not None else set(sizes), no_body)


def analyse_configs(target: Target, item: int, lead: int, ext: int, operands: list[Operand], block: np.ndarray,
                    db: np.ndarray, active: np.ndarray, body_cycles: dict[int, float], scratch_bytes: dict[int, int],
                    exact: set[int], no_body: set[int]) -> Space:
    """The analysis of given (block, db, active) arrays (blocks among the keys of ``body_cycles``)."""
    block, db, active = np.asarray(block, dtype=np.int64), np.asarray(db, dtype=bool), np.asarray(active, np.int64)
    blocks = lead * (ext // block)
    per_cpe = -(-blocks // active)
    cgs = -(-active // CPES)  # core groups the blocks spread over, each with its own memory
    on_cg = active // cgs  # CPEs of one CG contending for its DMA
    ldm = np.zeros(block.shape, dtype=np.int64)
    get_c = np.zeros(block.shape)  # one block's gets, cycles
    put_c = np.zeros(block.shape)
    whole_c = np.zeros(block.shape)  # the whole operands, once per CPE
    for p in operands:
        elems = p.elems(block)
        nbytes = elems * item
        if not p.sliced:
            ldm += nbytes
            whole_c += request_cycles(target.dma, "get", nbytes, active_cpes=on_cg)
        elif p.is_input:
            ldm += nbytes * np.where(db, 2, 1)
            get_c += request_cycles(target.dma, "get", nbytes, active_cpes=on_cg)
        else:
            ldm += nbytes
            put_c += request_cycles(target.dma, "put", nbytes, active_cpes=on_cg)
    comp_c = np.array([body_cycles[b] for b in block.tolist()], dtype=float)
    ldm += np.array([scratch_bytes[b] for b in block.tolist()], dtype=np.int64)
    why = np.full(block.shape, Why.OK.value, dtype=object)
    why[ldm > target.ldm_budget_bytes] = Why.LDM.value
    why[active > blocks] = Why.IDLE_CPES.value
    why[cgs > target.cgs] = Why.CHIP.value
    why[np.isin(block, list(no_body))] = Why.NO_BODY.value
    # without db every block waits for its gets, computes, puts; with db block i+1's gets run
    # during block i's compute (the longer of the two counts), the first block's gets are exposed
    serial = per_cpe * (get_c + comp_c + put_c)
    overlapped = get_c + (per_cpe - 1) * (np.maximum(get_c, comp_c) + put_c) + comp_c + put_c
    cycles = whole_c + np.where(db, overlapped, serial)
    counts = dma_counts(lead, ext, operands, item, block, active)
    return Space(block, db, active, blocks, per_cpe, ldm, why, counts["get_reqs"], counts["get_bytes"],
                 counts["put_reqs"], counts["put_bytes"], (whole_c + per_cpe * (get_c + put_c)) / target.clock_hz,
                 per_cpe * comp_c / target.clock_hz,
                 target.spawn_join_s + np.where(cgs > 1, target.cg_launch_s, 0.0) + cycles / target.clock_hz,
                 np.isin(block, list(exact)))
