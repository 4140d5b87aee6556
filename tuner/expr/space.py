"""The schedule space of an expression operator: the built-in knobs over the derived geometry.

:class:`ExprSpace` is a :class:`~tuner.space.space.ScheduleSpace` (same knob names and encoding, so
the simulator, the cost-model features, the OpenACC baseline and the search strategies use it
unchanged); it swaps the op-specific geometry for :class:`~tuner.expr.geometry.ExprGeometry` and the
analysis for :func:`~tuner.expr.analysis.analyze_expr`. The sampling and neighbour methods are
overridden only because the base class calls its module's ``analyze`` rather than ``self.analyze``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tuner.errors import InvalidConfigError
from tuner.expr.analysis import analyze_expr
from tuner.expr.geometry import PACK_UNSUPPORTED, ExprGeometry
from tuner.expr.workload import ExprWorkload
from tuner.space.analysis import Analysis
from tuner.space.choices import Acc, Dma, Order, Pack, Reason, Share, reason_label
from tuner.space.knobs import Knob
from tuner.space.space import GRIDS, UNROLL_CHOICES, ScheduleSpace
from tuner.targets import Target, get_target


class ExprSpace(ScheduleSpace):
    """All schedules of one expression operator on one target."""

    workload: ExprWorkload
    geometry: ExprGeometry  # type: ignore[assignment]  # OpGeometry's role, with operand groups

    def __init__(self, workload: ExprWorkload, target: Target | str,
                 restrict: Mapping[str, Sequence[Any]] | None = None) -> None:
        self.workload = workload
        self.target = get_target(target)
        self.geometry = geo = ExprGeometry(workload.expr)
        knobs = [Knob(f"tile_{a.name}", a.choices, doc=f"tile size of axis {a.name} ({a.role}, extent {a.extent})")
                 for a in geo.axes]
        knobs += [
            Knob("grid", GRIDS, ordered=False, doc="CPE grid: row axes' tiles over mesh rows, col axes' over columns"),
            Knob("share", Share.labels(), ordered=False, doc="tile sharing across the mesh"),
            Knob("dma", Dma.labels(), ordered=False, doc="one strided descriptor per tile, or one request per row"),
            Knob("put_lines", (0, 1), ordered=False, doc="pad output rows so puts write whole 128-B lines"),
            Knob("db_a", (0, 1), ordered=False, doc="double-buffer the row-shared operands"),
            Knob("db_b", (0, 1), ordered=False, doc="double-buffer the column-shared operands"),
            Knob("db_c", (0, 1), ordered=False, default=0,
                 doc="double-buffer the output tile: its put overlaps the next tile's compute"),
            Knob("tile_order", Order.labels(), ordered=False, doc="traversal of a CPE's output tiles"),
            Knob("inner", geo.inner_axes, ordered=False, doc="innermost compute loop axis"),
            self._simd_knob(workload),
            Knob("unroll", UNROLL_CHOICES, doc="independent accumulators (register block)"),
            self._acc_knob(workload),
            self._pack_knob(geo),
        ]
        if restrict:
            knobs = self._restricted(knobs, restrict)
        self.knobs = tuple(knobs)
        self.knob_index = {k.name: i for i, k in enumerate(self.knobs)}
        self.codes = [k.codes for k in self.knobs]
        self.sizes = np.array([len(k) for k in self.knobs], dtype=np.int64)
        self.ordered = np.array([k.ordered for k in self.knobs], dtype=bool)
        grids = self.knobs[self.knob_index["grid"]].choices
        self.grid_rows = np.array([int(g.split("x")[0]) for g in grids], dtype=np.float64)
        self.grid_cols = np.array([int(g.split("x")[1]) for g in grids], dtype=np.float64)

    def _simd_knob(self, workload: ExprWorkload) -> Knob:
        """Vector lanes, or ``simd`` = 1 alone when the body has a node with no vector form (a libm
        call, a cast, a select): the generated C then prints the loop scalar, and the analysis must
        not charge vectors it does not issue (tuner/codegen/simd_expr.py vectorises the rest)."""
        doc = "vector lanes (1 = scalar)"
        if workload.expr.scalar_reason:
            return Knob("simd", (1,), doc=f"{doc}; only 1: {workload.expr.scalar_reason}")
        return Knob("simd", self.target.simd_widths[workload.dtype], doc=doc)

    @staticmethod
    def _acc_knob(workload: ExprWorkload) -> Knob:
        """``acc = "reg"`` only where the micro-kernel prints the body (``c += a * b``); elsewhere the
        accumulators stay in LDM, as the generated C keeps them."""
        doc = "accumulators in LDM or registers"
        if workload.expr.block_reason:
            return Knob("acc", (Acc.LDM.label,), ordered=False, default=Acc.LDM.label,
                        category_codes=(int(Acc.LDM),), doc=f"{doc}; only ldm: {workload.expr.block_reason}")
        return Knob("acc", Acc.labels(), ordered=False, default=Acc.LDM.label, doc=doc)

    @staticmethod
    def _pack_knob(geo: ExprGeometry) -> Knob:
        """``pack`` only where every b operand's tile boxes partition it (ExprGeometry.packable): a
        halo, a stride or a flip makes boxes overlap or skip, and a tile-after-tile copy would then
        have to duplicate elements -- such operators offer ``pack="none"`` alone, by name here."""
        doc = "column-shared operands laid out tile after tile: one contiguous DMA per tile"
        if all(geo.packable(op) for op in geo.group("b")):
            return Knob("pack", Pack.labels(), ordered=False, default=Pack.NONE.label, doc=doc)
        return Knob("pack", (Pack.NONE.label,), ordered=False, default=Pack.NONE.label,
                    category_codes=(int(Pack.NONE),),
                    doc=doc + f"; {PACK_UNSUPPORTED}")

    def analyze(self, index: np.ndarray) -> Analysis:
        return analyze_expr(self, index)

    def is_valid(self, index: np.ndarray) -> np.ndarray:
        return self.analyze(index).valid

    def check(self, config: dict[str, Any]) -> np.ndarray:
        vector = self.encode(config)
        result = self.analyze(vector[None, :])
        if not result.valid[0]:
            raise InvalidConfigError(f"config breaks the rule {reason_label(result.reason[0])!r}: "
                                     f"LDM {int(result.ldm_total[0])} B of {self.target.ldm_budget_bytes} B")
        return vector

    def _repair(self, index: np.ndarray, rng: np.random.Generator, rounds: int = 12) -> np.ndarray:
        tile_cols = [i for i, k in enumerate(self.knobs) if k.name.startswith("tile_") and len(k) > 1]
        index = index.copy()
        for _ in range(rounds if tile_cols else 0):
            over = self.analyze(index).reason == Reason.LDM_OVERFLOW
            if not over.any():
                break
            rows = np.flatnonzero(over)
            cols = rng.choice(tile_cols, size=rows.size)
            index[rows, cols] = np.maximum(0, index[rows, cols] - 1 - rng.integers(0, 2, rows.size))
        return index

    def sample(self, n: int, rng: np.random.Generator | int | None = None, max_rounds: int = 50) -> np.ndarray:
        rng = np.random.default_rng(rng)
        found, have = [], 0
        for _ in range(max_rounds):
            cand = self._repair(rng.integers(0, self.sizes, size=(max(256, 2 * (n - have)), len(self.sizes))), rng)
            cand = cand[self.analyze(cand).valid]
            found.append(cand)
            have += len(cand)
            if have >= n:
                break
        return np.concatenate(found)[:n] if found else np.empty((0, len(self.sizes)), dtype=np.int64)

    def neighbours(self, index: np.ndarray, rng: np.random.Generator, n_moves: int = 1) -> np.ndarray:
        index = np.atleast_2d(index)
        out = index.copy()
        rows = np.arange(len(index))
        movable = np.flatnonzero(self.sizes > 1)
        for _ in range(n_moves):
            cols = rng.choice(movable, size=len(index))
            step = rng.choice([-2, -1, 1, 2], size=len(index), p=[0.15, 0.35, 0.35, 0.15])
            ordered_val = np.clip(out[rows, cols] + step, 0, self.sizes[cols] - 1)
            jump = (out[rows, cols] + rng.integers(1, np.maximum(self.sizes[cols], 2))) % self.sizes[cols]
            out[rows, cols] = np.where(self.ordered[cols], ordered_val, jump)
        return np.where(self.analyze(out).valid[:, None], out, index)

    def enumerate(self, limit: int = 2_000_000, chunk: int = 200_000) -> np.ndarray | None:
        if self.size > limit:
            return None
        valid = []
        for start in range(0, self.size, chunk):
            flat = np.arange(start, min(start + chunk, self.size))
            idx = np.stack(np.unravel_index(flat, tuple(self.sizes)), axis=1).astype(np.int64)
            valid.append(idx[self.analyze(idx).valid])
        return np.concatenate(valid)
