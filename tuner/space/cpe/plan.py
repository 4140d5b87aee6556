"""One way to cut a memory-bound operator into blocks (a KernelPlan), and the CPE kernel it makes.

tuner.aot.cpe_ops finds the plans of a generic node: which output axis the blocks run along (or a
pool's output rows with their halo), which operands are sliced and which are fetched whole, and how
to legalize the operator on one block. A plan's schedule space is cpe_schedule's grid (block size,
double-buffered gets, active CPEs) times the SIMD lanes the body is printed with. Two consumers read
it, and both go through this one class so they cannot disagree:

* the compiler, with no tuned config, takes the configuration of least simulated time (``best``);
* a tuning task (tuner.kinds.cpe_kernel: its space, simulator and emulator check) evaluates every configuration
  (``space``) and builds the one a measurement or the tuning log names (``op``).

A body's operation counts come from legalizing it at a block size; between legalized sizes they are
predicted linearly (``space``), and a configuration that is built or reported is always counted on
its own body (``op``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.ir.cprint.legalized import CFunction, Work
from tuner.ir.graph import slave_symbol
from tuner.space.cpe.schedule import CPES, Operand, Space, Window, analyse_configs, configs
from tuner.targets import Target


@dataclass
class ParamSlice:
    sliced: bool
    ext: int  # extent along the block axis (sliced operands)
    inner: int  # elements after the block axis
    elems: int  # elements held in LDM
    # a sliced operand whose block moves with the leading indices; False: the same block for every
    # leading index (a per-channel [1, C, 1, 1] operand of an [N, C, H, W] output cut along C)
    per_lead: bool = True
    # False: extent 1 along the axis, broadcast over it: every block of one leading index reads the
    # same ``inner`` elements (a per-row mean of a row cut into blocks)
    along: bool = True


def _operands(params: list[ParamSlice], n_inputs: int, window: Window | None) -> list[Operand]:
    """The analysis' view of a kernel's parameters (input 0 read through ``window`` when it has one)."""
    return [Operand(k < n_inputs, p.sliced, p.inner if p.sliced else p.elems,
                    window if k == 0 and window is not None else None, p.along)
            for k, p in enumerate(params)]


@dataclass
class CpeOp:
    body: CFunction  # the computation of one block
    axis: int
    block: int
    lead: int  # product of the output extents before the axis
    nj: int  # blocks along the axis
    params: list[ParamSlice]  # inputs, then outputs (the node's order)
    n_inputs: int
    ldm_bytes: int
    seconds: float  # simulated time of the kernel
    index: int = -1  # kernel number in slave.c (set when emitted)
    db: bool = False  # double-buffered gets
    active: int = CPES  # CPEs that take blocks
    window: Window | None = None  # input 0 read through a halo window along the axis (pool rows)
    fill: float = 0.0  # the value of a window's rows outside the input (the pool's padding)
    configs: int = 0  # size of the schedule space it was picked from
    valid: int = 0  # of which could run
    lanes: int = 1  # SIMD lanes of the body (1: scalar C)
    tuned: bool = False  # its configuration came from the tuning log
    workload: Any = None  # its task (tuner.space.cpe.workload.CpeKernelWorkload), when it has one
    cut: str = ""  # the plan's cut (KernelPlan.cut)
    plan: Any = None  # the KernelPlan it was built from (tuner.aot.cpe_fusion fuses plans of one cut)

    @property
    def config(self) -> dict[str, Any]:
        """The configuration in the knobs of its task's space (tuner.space.cpe.space)."""
        return {"cut": self.cut, "block": self.block, "db": int(self.db), "active": self.active, "simd": self.lanes}

    @property
    def blocks(self) -> int:
        return self.lead * self.nj

    @property
    def name(self) -> str:
        return slave_symbol(self.index)

    def operands(self) -> list[Operand]:
        return _operands(self.params, self.n_inputs, self.window)


def cycles(w: Work, target: Target) -> float:
    """One block's body at the Target's CPE costs (one cycle per instruction: arithmetic, load, store)."""
    return float(w.arith + w.loads + w.stores + target.cpe_transcendental_cycles * w.transcendental)


def divisors(n: int) -> list[int]:
    return sorted({d for i in range(1, int(n ** 0.5) + 1) if n % i == 0 for d in (i, n // i)}, reverse=True)


VECTOR_SCAN = 8  # block sizes tried for a vector body before a lanes value is given up (each a legalization)


def _best(space: Space) -> int:
    return space.best()


@dataclass
class KernelPlan:
    """A node cut into ``lead * ext / block`` blocks along ``axis``; ``body_at(block, lanes)`` prints
    one block's computation (None: the operator does not legalize on blocks of that size, or has no
    vector form at those lanes)."""

    axis: int
    lead: int
    ext: int  # the output's extent along the axis
    params: list[ParamSlice]
    n_inputs: int
    item: int  # bytes per element
    body_at: Callable[[int, int], CFunction | None]
    window: Window | None = None
    fill: float = 0.0
    sliced_funcs: dict[int, Any] = field(default_factory=dict)  # block -> the PrimFunc body_at legalized
    _bodies: dict[tuple[int, int], CFunction | None] = field(default_factory=dict, repr=False)

    @property
    def operands(self) -> list[Operand]:
        return _operands(self.params, self.n_inputs, self.window)

    @property
    def cut(self) -> str:
        """How it cuts its operator: along output axis k, or a pool's output rows with their halo (the
        ``cut`` knob of tuner.space.cpe.space)."""
        return "rows" if self.window is not None else f"axis{self.axis}"

    def body(self, block: int, lanes: int = 1) -> CFunction | None:
        key = (block, lanes)
        if key not in self._bodies:
            self._bodies[key] = self.body_at(block, lanes)
        return self._bodies[key]

    def sizes(self, target: Target) -> list[int]:
        """Block sizes whose operand blocks alone fit the LDM budget (largest first)."""
        ops = self.operands
        return [b for b in divisors(self.ext)
                if sum(int(p.elems(np.asarray(b))) for p in ops) * self.item <= target.ldm_budget_bytes]

    def _counts(self, target: Target, lanes: int, exact: bool
                ) -> tuple[list[int], dict[int, float], dict[int, int], set[int], set[int]] | None:
        """(sizes, body cycles and scratch bytes per size, sizes counted on their own body, sizes
        that do not legalize); None when nothing fits or the smallest sizes have no body."""
        sizes = self.sizes(target)
        if not sizes:
            return None
        if exact:
            for b in sizes:
                self.body(b, lanes)
        fit = self._reference_sizes(sorted(sizes), lanes)
        if fit is None:
            return None
        b1, b2 = fit[0], fit[-1]
        f1, f2 = self.body(b1, lanes), self.body(b2, lanes)
        assert f1 is not None and f2 is not None
        c1, c2, s1, s2 = cycles(f1.work, target), cycles(f2.work, target), f1.scratch_bytes, f2.scratch_bytes
        # between two legalized sizes a body's counts are linear in the block size (through the
        # origin when only one size was legalized)
        slope_c = (c2 - c1) / (b2 - b1) if b2 != b1 else c1 / b1
        slope_s = (s2 - s1) / (b2 - b1) if b2 != b1 else s1 / b1
        body_cycles = {b: c1 + slope_c * (b - b1) for b in sizes}
        scratch = {b: int(np.ceil(s1 + slope_s * (b - b1))) for b in sizes}
        counted, failed = set(), set()
        for (b, ln), f in self._bodies.items():
            if ln != lanes or b not in body_cycles:
                continue
            if f is None:
                failed.add(b)
            else:
                body_cycles[b], scratch[b] = cycles(f.work, target), f.scratch_bytes
                counted.add(b)
        return sizes, body_cycles, scratch, counted, failed

    def _reference_sizes(self, ascending: list[int], lanes: int) -> list[int] | None:
        """The two block sizes the counts are interpolated from: the two smallest (scalar: both must
        legalize). A vector body needs inner loops of at least ``lanes`` iterations, which the
        smallest blocks may not have: the two smallest sizes with a vector body, among the first
        ``VECTOR_SCAN`` (those that have none are NO_BODY)."""
        if lanes == 1:
            fit = ascending[:2]
            return fit if all(self.body(b, 1) is not None for b in fit) else None
        fit = [b for b in ascending[:VECTOR_SCAN] if self.body(b, lanes) is not None][:2]
        return fit or None

    def space(self, target: Target, lanes: int = 1, exact: bool = False) -> Space | None:
        """Every (block, db, active) configuration at ``lanes``; a body counted at its own size where
        it was legalized (``exact``: legalize every size first), predicted linearly in between."""
        return self._analysed(target, lanes, exact)

    def evaluate(self, target: Target, lanes: int, block: np.ndarray, db: np.ndarray, active: np.ndarray
                 ) -> Space | None:
        """The analysis of given configurations at ``lanes`` (blocks among ``sizes``)."""
        return self._analysed(target, lanes, False, (block, db, active))

    def _analysed(self, target: Target, lanes: int, exact: bool,
                  grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Space | None:
        got = self._counts(target, lanes, exact)
        if got is None:
            return None
        sizes, body_cycles, scratch, counted, failed = got
        block, db, active = grid if grid is not None else configs(self.lead, self.ext, sizes, target.cgs)
        return analyse_configs(target, self.item, self.lead, self.ext, self.operands, block, db, active, body_cycles,
                               scratch, counted, failed)

    def best(self, target: Target, choose: Callable[[Space], int] = _best, lanes: int = 1) -> CpeOp | None:
        """The configuration ``choose`` picks, re-evaluated until its figures are counted on its own body."""
        for _ in range(16):
            space = self.space(target, lanes)
            if space is None:
                return None
            i = choose(space)
            if i < 0:
                return None
            b = int(space.block[i])
            if bool(space.exact[i]):
                return self._op(space, i, lanes)
            self.body(b, lanes)
        return None

    def op(self, target: Target, block: int, db: bool, active: int, lanes: int = 1) -> CpeOp | None:
        """The kernel of one configuration, counted on its own body; None when it cannot run."""
        if block not in self.sizes(target) or self.body(block, lanes) is None:
            return None
        space = self.evaluate(target, lanes, np.array([block]), np.array([db]), np.array([active]))
        if space is None or space.why[0] != "ok":
            return None
        return self._op(space, 0, lanes)

    def _op(self, space: Space, i: int, lanes: int) -> CpeOp:
        b = int(space.block[i])
        body = self.body(b, lanes)
        assert body is not None
        params = []
        for k, p in enumerate(self.params):
            elems = p.elems
            if p.sliced and p.along:
                rows = int(self.window.rows(np.asarray(b))) if self.window is not None and k == 0 else b
                elems = rows * p.inner
            params.append(ParamSlice(p.sliced, p.ext, p.inner, elems, p.per_lead, p.along))
        return CpeOp(body, self.axis, b, self.lead, self.ext // b, params, self.n_inputs, int(space.ldm_bytes[i]),
                     float(space.seconds[i]), db=bool(space.db[i]), active=int(space.active[i]), window=self.window,
                     fill=self.fill, configs=len(space), valid=int((space.why == "ok").sum()), lanes=lanes,
                     cut=self.cut, plan=self)
