"""The schedule space of a memory-bound CPE kernel: knobs, encoding, validity and the analysis table.

Knobs (tuner.space.cpe.schedule and tuner.space.cpe.plan say what each does to the kernel):

* ``cut``: how the operator is split into blocks: along output axis k (``axis<k>``) or, for a 2-D
  pool, along its output rows with their halo (``rows``);
* ``block``: output indices per block along the cut (a divisor of its extent): the bytes of every
  DMA request and the LDM it needs;
* ``db``: double-buffered gets (the next block's operands in flight during this block's compute);
* ``active``: CPEs that take blocks, round-robin (how the work splits over the 64 CPEs, or over the CPEs
  of several core groups on a target of several);
* ``simd``: vector lanes of the block's body (1 = scalar C).

The space is small (a few thousand combinations), so it is analysed once, whole: every combination's
validity (a named ``Why``), LDM bytes and estimated seconds are held in dense tables, and ``analyze``
is a lookup. The tables predict a body's counts between legalized block sizes (linear in the block);
``exact_seconds`` counts a configuration on its own legalized body, which is what a measurement on
the simulator reports. It offers the interface search strategies use (names, sizes, encode, decode,
sample, neighbours, check, enumerate) like ``tuner.space.ScheduleSpace``; the knob product is the
shared ``tuner.space.knobs.KnobSpace``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from tuner.errors import InvalidConfigError
from tuner.space.cpe.schedule import ACTIVE_CHOICES, CPES, Why, chip_actives
from tuner.space.cpe.workload import CpeKernelWorkload
from tuner.space.knobs import Knob, KnobSpace
from tuner.space.space import Config
from tuner.targets import Target, get_target

_WHY = [w.value for w in Why]  # reason codes: index into this list


@dataclass
class CpeAnalysis:
    """The analysis of some configurations (arrays of one length)."""

    valid: np.ndarray
    reason: np.ndarray  # index into Why (0 = ok)
    ldm_total: np.ndarray
    seconds: np.ndarray  # estimated kernel seconds (inf where invalid)
    dma_seconds: np.ndarray  # DMA of the busiest CPE
    compute_seconds: np.ndarray  # its blocks' bodies
    per_cpe: np.ndarray  # blocks of the busiest CPE
    block_bytes: np.ndarray  # bytes of one block's sliced operands (one copy)

    def why(self, row: int) -> str:
        return _WHY[int(self.reason[row])]


class CpeKernelSpace(KnobSpace):
    """All schedules of one memory-bound kernel on one target."""

    def __init__(self, workload: CpeKernelWorkload, target: Target | str) -> None:
        from tuner.space.cpe.task import workload_plans

        self.workload = workload
        self.target = get_target(target)
        self.plans = workload_plans(workload, self.target)
        if not self.plans:
            raise InvalidConfigError(f"{workload.key} does not cut into blocks that fit the LDM of {self.target.name}")
        sizes = sorted({b for p in self.plans.values() for b in p.sizes(self.target)})
        actives = set(ACTIVE_CHOICES) | set(chip_actives(self.target.cgs))
        for p in self.plans.values():
            actives |= {p.lead * (p.ext // b) for b in p.sizes(self.target) if p.lead * (p.ext // b) < CPES}
        lanes = sorted(set(self.target.simd_widths[workload.dtype]))
        self._set_knobs((
            Knob("cut", tuple(self.plans), ordered=False, doc="the output axis blocks run along, or a pool's rows"),
            Knob("block", tuple(sizes), doc="output indices per block along the cut (a divisor of its extent)"),
            Knob("db", (0, 1), ordered=False, doc="double-buffered gets: the next block's operands in flight"),
            Knob("active", tuple(sorted(actives)), doc="CPEs that take blocks, round-robin"),
            Knob("simd", tuple(lanes), doc="vector lanes of the block's body (1 = scalar)"),
        ))
        self._table = self._analyse_all()

    # --- the analysis table ---------------------------------------------------------------------
    def _analyse_all(self) -> CpeAnalysis:
        shape = tuple(int(s) for s in self.sizes)
        n = math.prod(shape)
        grid = np.stack(np.unravel_index(np.arange(n), shape), axis=1)
        reason = np.full(n, _WHY.index(Why.BLOCK.value), dtype=np.int64)
        ldm = np.zeros(n, dtype=np.int64)
        seconds = np.full(n, np.inf)
        dma, compute, per_cpe, block_bytes = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        def values(knob: str, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
            """The knob's choice in each of the grid's ``rows``."""
            j = self.knob_index[knob]
            return np.asarray(self.knobs[j].choices)[grid[rows, j]]

        for ci, plan in enumerate(self.plans.values()):
            fits = list(plan.sizes(self.target))
            for li, lanes in enumerate(self.knobs[self.knob_index["simd"]].choices):
                rows = np.flatnonzero((grid[:, self.knob_index["cut"]] == ci) & (grid[:, self.knob_index["simd"]] == li)
                                      & np.isin(values("block"), fits))
                if not len(rows):
                    continue
                got = plan.evaluate(self.target, int(lanes), values("block", rows), values("db", rows),
                                    values("active", rows))
                if got is None:  # no body at these lanes (nothing vectorises) or at the smallest blocks
                    reason[rows] = _WHY.index(Why.NO_BODY.value)
                    continue
                reason[rows] = [_WHY.index(w) for w in got.why.tolist()]
                ldm[rows] = got.ldm_bytes
                seconds[rows] = got.seconds
                dma[rows], compute[rows], per_cpe[rows] = got.dma_s, got.compute_s, got.per_cpe
                block_bytes[rows] = [sum(int(o.elems(np.asarray(b))) for o in plan.operands if o.sliced) * plan.item
                                     for b in got.block.tolist()]
        valid = reason == 0
        return CpeAnalysis(valid, reason, ldm, np.where(valid, seconds, np.inf), dma, compute, per_cpe, block_bytes)

    def _flat(self, index: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(np.atleast_2d(index).T), tuple(int(s) for s in self.sizes))

    def analyze(self, index: np.ndarray) -> CpeAnalysis:
        f = self._flat(index)
        return CpeAnalysis(*(getattr(self._table, col.name)[f] for col in fields(CpeAnalysis)))

    def is_valid(self, index: np.ndarray) -> np.ndarray:
        return self.analyze(index).valid

    def exact_seconds(self, config: Config) -> tuple[float, int] | None:
        """(seconds, LDM bytes) of one configuration counted on its own legalized body; None when it
        cannot run (``why_not`` says why: the table only predicted its body)."""
        plan = self.plans[config["cut"]]
        op = plan.op(self.target, int(config["block"]), bool(config["db"]), int(config["active"]), int(config["simd"]))
        return (op.seconds, op.ldm_bytes) if op is not None else None

    def why_not(self, config: Config) -> Why:
        """Why a configuration the table predicted valid does not run on its own body: no body (it does
        not legalize, or nothing vectorises at these lanes and this size), or its LDM."""
        body = self.plans[config["cut"]].body(int(config["block"]), int(config["simd"]))
        return Why.NO_BODY if body is None else Why.LDM

    def check(self, config: Config) -> np.ndarray:
        vector = self.encode(config)
        a = self.analyze(vector[None, :])
        if not a.valid[0]:
            raise InvalidConfigError(f"config breaks the rule {a.why(0)!r}: LDM {int(a.ldm_total[0])} B of "
                                     f"{self.target.ldm_budget_bytes} B")
        return vector

    # --- sampling -------------------------------------------------------------------------------
    @cached_property
    def valid_rows(self) -> np.ndarray:
        shape = tuple(int(s) for s in self.sizes)
        flat = np.flatnonzero(self._table.valid)
        return np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64) if len(flat) \
            else np.empty((0, len(shape)), dtype=np.int64)

    def enumerate(self, limit: int = 2_000_000, chunk: int = 200_000) -> np.ndarray | None:
        return self.valid_rows if self.size <= limit else None

    def sample(self, n: int, rng: np.random.Generator | int | None = None, max_rounds: int = 50) -> np.ndarray:
        """``n`` valid configs drawn uniformly (all of them, shuffled, when there are fewer)."""
        rng = np.random.default_rng(rng)
        rows = self.valid_rows
        if not len(rows):
            return rows
        return rows[rng.choice(len(rows), size=n, replace=len(rows) < n)] if n <= len(rows) * 4 \
            else rows[rng.integers(0, len(rows), n)]

    # --- named configs --------------------------------------------------------------------------
    def default_config(self) -> Config:
        """What the compiler runs without a tuned config: the fastest plan's best scalar configuration
        (tuner.space.cpe.plan.KernelPlan.best); the baseline every measured config is compared with."""
        for cut, plan in self.plans.items():
            op = plan.best(self.target)
            if op is not None:
                return {"cut": cut, "block": op.block, "db": int(op.db), "active": op.active, "simd": 1}
        raise InvalidConfigError(f"{self.workload.key} has no valid configuration")

    def naive_config(self) -> Config:
        return self.default_config()

    def features(self, index: np.ndarray) -> np.ndarray:
        """Cost-model features of configs: the log2 estimated time first (the prior), then the knobs
        and analysis figures a residual model can correct it by."""
        index = np.atleast_2d(index)
        a = self.analyze(index)
        lanes = self.codes[self.knob_index["simd"]][index[:, self.knob_index["simd"]]]
        est = np.where(a.valid, a.seconds, 1.0)
        cols = [np.log2(est * 1e9), index[:, 0].astype(np.float64), np.log2(a.block_bytes + 1.0),
                index[:, self.knob_index["db"]].astype(np.float64),
                self.codes[self.knob_index["active"]][index[:, self.knob_index["active"]]] / CPES,
                np.log2(lanes), np.log2(a.per_cpe + 1.0), a.ldm_total / self.target.ldm_budget_bytes,
                np.log2(a.dma_seconds * 1e9 + 1.0), np.log2(a.compute_seconds * 1e9 + 1.0), a.valid.astype(np.float64)]
        return np.stack(cols, axis=1).astype(np.float32)

    def __repr__(self) -> str:
        return f"CpeKernelSpace({self.workload.key}, {self.target.name}, {len(self.knobs)} knobs, {self.size} points)"


PRIOR_COLUMN = 0  # features(): the log2 estimated seconds

