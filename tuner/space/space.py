"""The schedule space of one (workload, target): knobs, encoding, validity, sampling, neighbours.

A config is a dict ``{knob name: choice}``; its integer encoding is the vector of choice indices
(what search strategies and the vectorized analysis work on). Only configs the analysis finds valid
(fitting the LDM budget and the hardware's other rules) are ever sampled or proposed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tuner.errors import InvalidConfigError
from tuner.space.analysis import Analysis, analyze
from tuner.space.chip import chip_knobs
from tuner.space.choices import Acc, CgOperands, CgSplit, Dma, Order, Pack, Reason, Share, reason_label
from tuner.space.knobs import Knob, KnobSpace
from tuner.space.ops import geometry_for
from tuner.targets import Target, get_target
from tuner.workloads import Workload

Config = dict[str, Any]

# Mesh grids (rows x cols of CPEs) the output tiles are spread over: every 2-D grid that fits the
# 8x8 mesh (fewer CPEs for small work) plus 1-D layouts over all 64 CPEs.
GRIDS = tuple(f"{r}x{c}" for r in (1, 2, 4, 8) for c in (1, 2, 4, 8)) + ("64x1", "1x64", "16x4", "4x16")
UNROLL_CHOICES = (1, 2, 4, 8, 16, 32)  # 32 accumulators + operands exceed 32 vector registers: spills


def config_hash(config: Config) -> str:
    """Stable identity of a config (same dict in any key order, same hash)."""
    return hashlib.sha1(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]


class ScheduleSpace(KnobSpace):
    """All schedules of one workload on one target."""

    def __init__(self, workload: Workload, target: Target | str,
                 restrict: Mapping[str, Sequence[Any]] | None = None) -> None:
        """``restrict`` narrows knobs to some of their choices (pinning a knob, a user's sub-space)."""
        self.workload = workload
        self.target = get_target(target)
        self.geometry = geometry_for(workload)
        knobs = [
            Knob(f"tile_{a.name}", a.choices, doc=f"tile size of axis {a.name} ({a.role}, extent {a.extent})")
            for a in self.geometry.axes
        ]
        knobs += [
            Knob("grid", GRIDS, ordered=False, doc="CPE grid: row axes' tiles over mesh rows, col axes' over columns"),
            Knob("share", Share.labels(), ordered=False, doc="tile sharing across the mesh"),
            Knob("dma", Dma.labels(), ordered=False, doc="one strided descriptor per tile, or one request per row"),
            Knob("put_lines", (0, 1), ordered=False, doc="pad output rows so puts write whole 128-B lines"),
            Knob("db_a", (0, 1), ordered=False, doc="double-buffer the a tiles (row-shared operands: data, A)"),
            Knob("db_b", (0, 1), ordered=False, doc="double-buffer the b tiles (column-shared operands: weights, B)"),
            Knob("db_c", (0, 1), ordered=False, default=0,
                 doc="double-buffer the output tile: its put is asynchronous, overlaps the next tile's "
                     "compute and is waited on before that LDM copy is reused"),
            Knob("tile_order", Order.labels(), ordered=False, doc="traversal of a CPE's output tiles"),
            Knob("inner", self.geometry.inner_axes, ordered=False, doc="innermost compute loop axis"),
            self._simd_knob(),
            Knob("unroll", UNROLL_CHOICES, doc="independent accumulators (register block)"),
            self._acc_knob(),
            self._pack_knob(),
            *chip_knobs(self.target),
        ]
        if restrict:
            knobs = self._restricted(knobs, restrict)
        self._set_knobs(knobs)
        grids = self.knobs[self.knob_index["grid"]].choices
        self.grid_rows = np.array([int(g.split("x")[0]) for g in grids], dtype=np.float64)
        self.grid_cols = np.array([int(g.split("x")[1]) for g in grids], dtype=np.float64)

    # The simd, acc and pack knobs offer what the generated C can do for the operator: an expression
    # body with no vector form (a libm call, a cast, a select) prints scalar C, so simd = 1 alone; one
    # other than c += a*b cannot print as the register-block micro-kernel, so acc = "ldm" alone; an
    # operand whose tile boxes overlap or skip (a halo, a stride, a flip) cannot be stored tile after
    # tile without duplicating elements, so pack = "none" alone. Each names its reason in the doc.
    def _simd_knob(self) -> Knob:
        doc = "vector lanes (1 = scalar)"
        if self.geometry.scalar_reason:
            return Knob("simd", (1,), doc=f"{doc}; only 1: {self.geometry.scalar_reason}")
        return Knob("simd", self.target.simd_widths[self.workload.dtype], doc=doc)

    def _acc_knob(self) -> Knob:
        if self.geometry.block_reason:
            return Knob("acc", (Acc.LDM.label,), ordered=False, default=Acc.LDM.label,
                        category_codes=(int(Acc.LDM),),
                        doc=f"accumulators in LDM; only ldm: {self.geometry.block_reason}")
        return Knob("acc", Acc.labels(), ordered=False, default=Acc.LDM.label,
                    doc="with an output axis innermost: accumulators through LDM every reduction step, or "
                        "held in registers across the chunk's reduction (tuner/space/compute.py)")

    def _pack_knob(self) -> Knob:
        doc = ("b laid out tile after tile (packed at compile time when it is a constant, by the host "
               "before each call otherwise), so each b tile is one contiguous DMA")
        if self.geometry.pack_reason:
            return Knob("pack", (Pack.NONE.label,), ordered=False, default=Pack.NONE.label,
                        category_codes=(int(Pack.NONE),), doc=f"{doc}; {self.geometry.pack_reason}")
        return Knob("pack", Pack.labels(), ordered=False, default=Pack.NONE.label, doc=doc)

    @staticmethod
    def _restricted(knobs: list[Knob], restrict: Mapping[str, Sequence[Any]]) -> list[Knob]:
        names = {k.name for k in knobs}
        unknown = set(restrict) - names
        if unknown:
            raise InvalidConfigError(f"cannot restrict unknown knobs {sorted(unknown)}")
        out = []
        for knob in knobs:
            if knob.name not in restrict:
                out.append(knob)
                continue
            allowed = list(restrict[knob.name])
            bad = [v for v in allowed if v not in knob.choices]
            if bad or not allowed:
                raise InvalidConfigError(f"restriction of {knob.name} to {allowed} leaves choices outside "
                                         f"{list(knob.choices)}")
            keep = [i for i, c in enumerate(knob.choices) if c in allowed]
            out.append(Knob(knob.name, tuple(knob.choices[i] for i in keep), knob.ordered, knob.doc,
                            category_codes=tuple(int(knob.codes[i]) for i in keep), default=knob.default))
        return out

    # --- analysis and validity ----------------------------------------------------------------
    def analyze(self, index: np.ndarray) -> Analysis:
        return analyze(self, index)

    def is_valid(self, index: np.ndarray) -> np.ndarray:
        return self.analyze(index).valid

    def check(self, config: Config) -> np.ndarray:
        """Encode a config and raise InvalidConfigError (with the rule it breaks) if it is invalid."""
        vector = self.encode(config)
        result = self.analyze(vector[None, :])
        if not result.valid[0]:
            raise InvalidConfigError(f"config breaks the rule {reason_label(result.reason[0])!r}: "
                                     f"LDM {int(result.ldm_total[0])} B of {self.target.ldm_budget_bytes} B")
        return vector

    # --- sampling -----------------------------------------------------------------------------
    def _repair(self, index: np.ndarray, rng: np.random.Generator,
                rounds: int = 12) -> tuple[np.ndarray, np.ndarray]:
        """Shrink tile sizes of LDM-overflowing configs; tight spaces then still sample fast. Returns
        the repaired rows and which of them are valid."""
        tile_cols = [i for i, k in enumerate(self.knobs) if k.name.startswith("tile_")]
        index = index.copy()
        valid = np.zeros(len(index), dtype=bool)
        rows = np.arange(len(index))
        for _ in range(rounds):
            # only the rows still overflowing are analysed again: a row that fits is never changed
            a = self.analyze(index[rows])
            valid[rows] = a.valid
            rows = rows[a.reason == Reason.LDM_OVERFLOW]
            if not rows.size:
                break
            cols = rng.choice(tile_cols, size=rows.size)
            index[rows, cols] = np.maximum(0, index[rows, cols] - 1 - rng.integers(0, 2, rows.size))
        else:  # the last round's shrinks are not analysed yet
            valid[rows] = self.analyze(index[rows]).valid
        return index, valid

    def sample(self, n: int, rng: np.random.Generator | int | None = None, max_rounds: int = 50) -> np.ndarray:
        """``n`` valid configs drawn uniformly over knobs (then repaired), as an index matrix.

        Returns fewer rows only if the space has fewer valid configs than asked for after
        ``max_rounds`` batches (tiny spaces); never loops forever.
        """
        rng = np.random.default_rng(rng)
        found: list[np.ndarray] = []
        have = 0
        for _ in range(max_rounds):
            batch = max(256, 2 * (n - have))
            cand = rng.integers(0, self.sizes, size=(batch, len(self.sizes)))
            cand, valid = self._repair(cand, rng)
            cand = cand[valid]
            found.append(cand)
            have += len(cand)
            if have >= n:
                break
        out = np.concatenate(found) if found else np.empty((0, len(self.sizes)), dtype=np.int64)
        return out[:n]

    def enumerate(self, limit: int = 2_000_000, chunk: int = 200_000) -> np.ndarray | None:
        """Every valid config, or None when the space has more than ``limit`` combinations."""
        if self.size > limit:
            return None
        valid: list[np.ndarray] = []
        for start in range(0, self.size, chunk):
            flat = np.arange(start, min(start + chunk, self.size))
            idx = np.stack(np.unravel_index(flat, tuple(self.sizes)), axis=1).astype(np.int64)
            valid.append(idx[self.analyze(idx).valid])
        return np.concatenate(valid)

    # --- named configs ------------------------------------------------------------------------
    def naive_config(self) -> Config:
        """An OpenACC-like schedule: element-wise DMA, no LDM reuse, no double buffering, one CPE row."""
        cfg: Config = {}
        for a in self.geometry.axes:
            cfg[f"tile_{a.name}"] = a.choices[0]  # every tile axis 1: element-wise transfers
        cfg.update(grid="1x8", share=Share.NONE.label, dma=Dma.ROWS.label, put_lines=0, db_a=0, db_b=0,
                   tile_order=Order.ROW.label, inner=self.geometry.inner_axes[0], simd=1, unroll=1,
                   acc=Acc.LDM.label, pack=Pack.NONE.label)
        if "cgs" in self.knob_index:
            # OpenACC on several CGs splits the outer loop (the row tiles) over them, as many as it can
            for cgs in range(self.target.cgs, 0, -1):
                split = {**cfg, "cgs": cgs, "cg_split": CgSplit.ROWS.label, "cg_operands": CgOperands.REPLICATE.label}
                if self.analyze(self.encode(split)[None, :]).valid[0]:
                    return split
        return cfg

    def __repr__(self) -> str:
        return (f"ScheduleSpace({self.workload.key}, {self.target.name}, {len(self.knobs)} knobs, "
                f"{self.size:.3g} points)")
