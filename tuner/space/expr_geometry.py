"""The tiling geometry derived from an :class:`~tuner.expr.expr.Expr`: roles, operand groups, tile boxes.

Same scheduling model as the built-in ops (tuner/space/ops.py): output tiles over *row* and *col*
spatial axes are spread over the CPE mesh, one *tiled* reduction axis is walked in chunks (the other
reduction axes stay whole in LDM, like a conv's R*S), and each operand is fetched per (tile, chunk).
What the built-ins hard-code is derived here:

* roles: the col axes are the spatial axes the first input does not depend on (TVM's convention puts
  the data operand first: the output-channel axis of a conv, n of a GEMM); with none, the last
  spatial axis (a stencil still spreads over a 2-D mesh);
* operand groups: group ``a`` holds the inputs independent of every col axis (shareable along a mesh
  row), group ``b`` the rest (shareable along a mesh column when the row tiles of a column agree on
  every row axis the operand reads);
* an operand's LDM box per tile along one index dimension ``sum_a c_a*a + o`` (span s) is
  ``sum_a |c_a| * (tile_a - 1) + s`` clipped to the tensor: halos, strides and dilation fall out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from tuner.expr.expr import Access, AxisKind, DimAccess, Expr, Reducer
from tuner.space.ops import AxisTiles, Dim, TileAxis, tile_choices

PAD_AXIS = "_r"  # the stand-in reduction axis (extent 1) of an element-wise expression
# Why an operator's space has no pack="b": the reason the pack knob names when it is left out.
PACK_UNSUPPORTED = "not offered: a b operand's tile boxes overlap or skip elements (halo, stride, flip)"


@dataclass(frozen=True)
class Operand:
    access: Access
    group: str  # "a" | "b"
    row_axes: tuple[str, ...]  # row axes the operand reads, in row-tile order


class ExprGeometry:
    """OpGeometry-like view of one expression (``axes``, ``inner_axes``, ``red_fixed``, ``red_axis``)."""

    prepass_bytes = 0  # inputs are used as given: a padded or dilated input is the user's tensor

    def __init__(self, expr: Expr, tiled: str | None = None) -> None:
        """``tiled``: the reduction axis walked in chunks (a spec's choice); default the longest."""
        self.expr = expr
        spatial = [a.name for a in expr.spatial]
        data = expr.inputs[0]
        cols = [s for s in spatial if s not in data.axes]
        if not cols or len(cols) == len(spatial):
            cols = spatial[-1:] if len(spatial) > 1 else []
        roles = {s: ("col" if s in cols else "row") for s in spatial}
        reduce = sorted(expr.reduce, key=lambda a: (a.name != tiled, -a.extent))  # tiled, else the longest, is chunked
        axes = [TileAxis(a.name, a.extent, roles[a.name], tile_choices(a.extent)) for a in expr.spatial]
        if reduce:
            axes.append(TileAxis(reduce[0].name, reduce[0].extent, "red", tile_choices(reduce[0].extent)))
            self.fixed = {a.name: a.extent for a in reduce[1:]}
        else:
            axes.append(TileAxis(PAD_AXIS, 1, "red", (1,)))
            self.fixed = {}
        self.axes = tuple(axes)
        self.red_fixed = prod(self.fixed.values())
        # The reduction nest keeps the expression's order; its innermost loop is the last reduction
        # axis (0 when that is the tiled one, as tuner/space/ops.py's ``red_innermost``).
        last_red = expr.reduce[-1].name if expr.reduce else None
        self.red_innermost = self.fixed.get(last_red, 0) if last_red else 0
        self.row_axes = tuple(a.name for a in self.axes if a.role == "row")
        self.col_axes = tuple(a.name for a in self.axes if a.role == "col")
        self.inner_axes = tuple(a.name for a in self.axes if a.name != PAD_AXIS)
        self.operands = tuple(
            Operand(acc, "b" if acc.axes & set(self.col_axes) else "a",
                    tuple(r for r in self.row_axes if r in acc.axes))
            for acc in expr.inputs
        )
        # P0 instructions per point as the generated C issues them (tuner/expr/parse.py _profile: a
        # multiply feeding an add is one FMA, max/min a compare and a select, a libm call its cost)
        self.fma_per_point = expr.instructions_per_point or max(1, -(-expr.ops_per_point // 2))

    @property
    def red_axis(self) -> TileAxis:
        return next(a for a in self.axes if a.role == "red")

    def group(self, name: str) -> tuple[Operand, ...]:
        return tuple(op for op in self.operands if op.group == name)

    # --- vectorised boxes ---------------------------------------------------------------------
    def _extent(self, axis: str, t: dict[str, AxisTiles], mean: bool) -> np.ndarray | int:
        if axis in t:
            return t[axis].mean if mean else t[axis].full
        return self.fixed[axis]

    def dims(self, acc: Access, t: dict[str, AxisTiles]) -> list[Dim]:
        """The LDM box of one operand (or the output) per tile, dimension by dimension."""
        like = t[self.red_axis.name].full
        out = []
        for d, extent in zip(acc.dims, acc.shape):
            full = np.zeros_like(like) + d.span
            mean = np.zeros_like(like) + d.span
            for axis, c in d.coefs:
                full = full + abs(c) * (self._extent(axis, t, False) - 1)
                mean = mean + abs(c) * (self._extent(axis, t, True) - 1)
            full = np.minimum(full, extent)
            tiled = [(a, c) for a, c in d.coefs if a in t]
            if tiled:
                # every tile's box spans full tiles (a ragged one's too, as TVM's cache_read region
                # does), clipped to the tensor: the mean over the tiles
                mean = self._mean_box(d, extent, tiled, t, full)
            out.append(Dim(full, np.minimum(mean, extent), extent))
        return out

    def _mean_box(self, d: DimAccess, extent: int, tiled: list[tuple[str, int]], t: dict[str, AxisTiles],
                  full: np.ndarray) -> np.ndarray:
        """Mean box of a dimension over every combination of its tiled axes' tile indices (one axis, or
        several as a weight gradient's ``y*s + r``), offsets and flips included."""
        # the unclipped box and the lowest index of tile (0, ..., 0)
        span = np.zeros_like(full) + d.span
        low = np.zeros_like(full) + d.offset
        for axis, c in d.coefs:
            size = self._extent(axis, t, False)
            span = span + abs(c) * (size - 1)
            if c < 0:
                low = low + c * (size - 1)
        *outer, (last, c_last) = tiled
        span, low = np.atleast_1d(span).astype(float), np.atleast_1d(low).astype(float)
        n_last = np.atleast_1d(t[last].count).astype(float)
        step = abs(c_last) * np.atleast_1d(t[last].full).astype(float)
        total = np.zeros(span.shape, dtype=float)
        # the outer tiled axes (rare: a weight gradient's) one tile index at a time; the last in
        # closed form
        for combo in itertools.product(*(range(int(np.max(t[a].count))) for a, _ in outer)):
            valid = np.ones(span.shape, dtype=bool)
            start = low.copy()
            for (axis, c), i in zip(outer, combo):
                valid &= i < np.atleast_1d(t[axis].count)
                start = start + c * i * np.atleast_1d(t[axis].full)
            if c_last < 0:  # the tiles walk downwards: the lowest box starts (count - 1) steps below
                start = start - step * (n_last - 1)
            total += np.where(valid, _sum_of_boxes(start, step, span, extent, n_last), 0.0)
        tiles = np.prod([np.atleast_1d(t[a].count) for a, _ in tiled], axis=0)
        return np.maximum(total / tiles, 1.0).reshape(np.shape(full))

    def output_dims(self, t: dict[str, AxisTiles]) -> list[Dim]:
        return self.dims(self.expr.output, t)

    def reusable(self, op: Operand, t: dict[str, AxisTiles]) -> np.ndarray:
        """The operand's box is the same for every tile the traversal keeps it across."""
        like = t[self.red_axis.name].full
        if op.group == "a":
            return np.ones_like(like, dtype=bool)  # independent of every col axis by construction
        count = np.ones_like(like)
        for r in op.row_axes:
            count = count * t[r].count
        return count == 1

    def shareable(self, op: Operand, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        """Whether the CPEs that would share the operand's tile need the same box.

        Group a: a mesh row's CPEs hold one row tile: always. Group b: a mesh column's pr CPEs hold
        pr consecutive row tiles (row axes flattened in order); they agree on every row axis the
        operand reads when pr divides the tile count of the row axes inside the last one it reads.
        """
        if op.group == "a" or not op.row_axes:
            return np.ones_like(pr, dtype=bool)
        last = self.row_axes.index(op.row_axes[-1])
        inner = np.ones_like(pr)
        for r in self.row_axes[last + 1:]:
            inner = inner * t[r].count
        return np.mod(inner, pr) == 0

    def stride_along(self, acc: Access, axis: str, box: list[Dim]) -> np.ndarray:
        """Element stride of the operand's LDM box along one axis (0: broadcast, 1: contiguous)."""
        stride = np.zeros_like(box[0].full)
        pitch = np.ones_like(box[0].full)
        for d, dim in zip(reversed(acc.dims), reversed(box)):
            stride = stride + d.coef(axis) * pitch
            pitch = pitch * dim.full
        return np.abs(stride)

    def misaligned(self, acc: Access, axis: str, lanes: int = 4) -> float:
        """Share of vector loads along ``axis`` that start off a vector boundary: the whole-LDM
        reduction axes (a conv's taps) shift the operand's innermost index by c*tap."""
        last = acc.dims[-1]
        if last.coef(axis) != 1:
            return 0.0
        taps = [(a, c) for a, c in last.coefs if a in self.fixed]
        if not taps:
            return 0.0
        shifts = [0]
        for a, c in taps:
            shifts = [s + c * v for s in shifts for v in range(self.fixed[a])]
        return sum(1 for s in shifts if s % lanes) / len(shifts)

    def body_reads(self, axis: str, boxes: dict[str, list[Dim]], w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(LDM loads, unaligned vector loads) of one trip of the body's vector loop along ``axis``, w lanes,
        as tuner/ir/cprint/expr_vector.py prints it: per operand read, a broadcast (the read does not move
        with ``axis``) is one load, a unit-stride vector (``axis`` only in the innermost index, step 1)
        one load -- two and a merge when it starts off a vector boundary -- and any other read w scalar
        loads. A unit read's start is its innermost offset from its box's origin (a stencil's halo
        taps), shifted by whole-LDM reduction taps along that index and by whole rows of the box (the
        other indices move in outer loops: every row start k * pitch mod w is taken as equally likely);
        the LDM buffers themselves start on a vector boundary."""
        loads, unaligned = np.zeros_like(w, dtype=float), np.zeros_like(w, dtype=float)
        lanes = np.maximum(w, 1).astype(np.int64)
        merged = {acc.tensor: acc for acc in self.expr.inputs}
        for read in self.expr.reads or self.expr.inputs:
            moving = [i for i, d in enumerate(read.dims) if d.coef(axis) != 0]
            if not moving:
                loads = loads + 1.0
                continue
            if moving != [len(read.dims) - 1] or read.dims[-1].coef(axis) != 1:
                loads = loads + lanes
                continue
            loads = loads + 1.0
            last = read.dims[-1]
            shifts = [last.offset - merged[read.tensor].dims[-1].offset]
            for a, c in last.coefs:
                if a in self.fixed:
                    shifts = [s + c * v for s in shifts for v in range(self.fixed[a])]
            box = boxes[read.tensor]
            # the pitch of a whole row: the innermost box extent (one-dimensional boxes have no rows)
            pitch = (box[-1].full if len(box) > 1 else np.zeros_like(box[-1].full)).astype(np.int64)
            off = np.zeros_like(loads)
            for k in range(int(lanes.max())):
                for sh in shifts:
                    off = off + np.where(k < lanes, np.mod(k * pitch + sh, lanes) != 0, False)
            unaligned = unaligned + np.where(lanes > 1, off / (lanes * len(shifts)), 0.0)
        return loads, unaligned

    def body_output_ops(self, axis: str, w: np.ndarray) -> np.ndarray:
        """P1 ops of the output in one trip of the body's vector loop along the output axis ``axis``
        (tuner/ir/cprint/expr_vector.py): a reduction body reads it (one vector load, or w scalar loads
        when it is strided along ``axis``), every body stores it (one vector store, or a store to a
        stack buffer, w scalar loads of it and w scalar stores). Lanes along the reduction: none."""
        if axis == self.red_axis.name:
            return np.zeros_like(w, dtype=float)
        lanes = np.maximum(w, 1).astype(float)
        unit = self.expr.output.dims[-1].coef(axis) == 1  # the output is indexed by its axes in order
        reads = self.expr.reducer is not Reducer.NONE
        load = (1.0 if unit else lanes) if reads else 0.0
        store = 1.0 if unit else np.where(w > 1, 1.0 + 2.0 * lanes, 1.0)
        return np.zeros_like(lanes) + load + store

    def packable(self, op: Operand) -> bool:
        """Whether the operand's per-tile boxes partition it, whatever the tile sizes, so that it can be
        stored tile after tile (the pack knob): every index dimension is one tiled axis with step 1 (box
        i starts at i*T) or one whole-LDM reduction axis spanning the tensor's dimension (one box)."""
        for d, extent in zip(op.access.dims, op.access.shape):
            if len(d.coefs) != 1 or d.span != 1 or d.offset != 0:
                return False
            axis, coef = d.coefs[0]
            if coef != 1:
                return False
            tiled = any(a.name == axis for a in self.axes)
            if not tiled and self.fixed.get(axis) != extent:
                return False
        return True

    def axis_kind(self, name: str) -> AxisKind:
        return AxisKind.SPATIAL if name in self.row_axes + self.col_axes else AxisKind.REDUCE


def _sum_of_boxes(low: np.ndarray, step: np.ndarray, span: np.ndarray, extent: int, count: np.ndarray) -> np.ndarray:
    """Sum over i < count of |[low + i*step, low + i*step + span) clipped to [0, extent)|, in closed form:
    the boxes below the top edge are whole, those above it stop at it; the ones starting below 0 lose
    what lies under it."""
    safe = np.maximum(step, 1.0)
    # sum of min(low + i*step + span, extent): whole while low + i*step + span <= extent
    whole = np.clip(np.floor((extent - low - span) / safe) + 1, 0, count)
    tops = whole * (low + span) + step * whole * (whole - 1) / 2 + (count - whole) * extent
    # sum of max(low + i*step, 0): a ragged tile of a flipped axis starts below 0, and its box is
    # clipped there (tuner/codegen/boxes.py): zero while low + i*step <= 0
    under = np.clip(np.floor(-low / safe) + 1, 0, count)
    bottoms = (count - under) * low + step * (count * (count - 1) - under * (under - 1)) / 2
    return tops - bottoms

