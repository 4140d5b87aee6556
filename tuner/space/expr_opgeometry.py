"""An expression's answers to the analysis' questions (tuner/space/ops.py :class:`OpGeometry`).

The one analysis (tuner/space/analysis.py) asks every operator for its operands' boxes, whether
CPEs may share or keep them, and how the inner loop walks them. A built-in op answers from its own
rules (tuner/space/conv2d.py); an expression from its affine accesses, which
:class:`~tuner.space.expr_geometry.ExprGeometry` turns into boxes, sharing and reuse, and this class
into the inner loop's facts: an operand needs a packed copy for SIMD when its LDM stride along the
inner axis is neither 0 (broadcast) nor 1 (contiguous) and the generated C can repack it, else it
is gathered lane by lane.
"""

from __future__ import annotations

from math import prod

import numpy as np

from tuner.space.compute import BodyReads
from tuner.space.expr_geometry import PACK_UNSUPPORTED, ExprGeometry
from tuner.space.ops import AxisTiles, Dim, InnerAccess, PadPrepass


class ExprOpGeometry(ExprGeometry):
    """:class:`ExprGeometry` with the rest of what the analysis asks (tuner/space/ops.py OpGeometry)."""

    # an expression's inputs are used as given, its indices affine (a spec module may add both)
    prepass: PadPrepass | None = None
    index_div: dict[tuple[str, int], tuple[str, int]] = {}

    @property
    def scalar_reason(self) -> str:
        return self.expr.scalar_reason

    @property
    def block_reason(self) -> str:
        return self.expr.block_reason

    @property
    def pack_reason(self) -> str:
        """Why pack = "b" is not offered: some b operand's tile boxes do not partition it
        (ExprGeometry.packable); "" when every one's do."""
        return "" if all(self.packable(op) for op in self.group("b")) else PACK_UNSUPPORTED

    @property
    def ops_per_point(self) -> int:
        return self.expr.ops_per_point

    @property
    def b_constant(self) -> bool:
        # b operands that read no row axis are a layer's weights (dense, conv), packed at compile
        # time; one that follows a row axis (a batch) is an activation, packed by the host per call
        return all(not op.row_axes for op in self.group("b"))

    @property
    def b_elements(self) -> int:
        return sum(prod(op.access.shape) for op in self.group("b"))

    @property
    def operand_axes(self) -> list[set[str]]:
        return [set(op.access.axes) for op in self.operands]

    def boxes(self, t: dict[str, AxisTiles]) -> tuple[list[list[Dim]], list[Dim]]:
        return [self.dims(op.access, t) for op in self.operands], self.output_dims(t)

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        boxes, out = self.boxes(t)
        return {**{op.group: box for op, box in zip(self.operands, boxes)}, "c": out}

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        gather, lane = [], []
        misaligned = np.zeros_like(w, dtype=float)
        for op, box in zip(self.operands, boxes):
            stride = self.stride_along(op.access, inner, box)
            strided = (stride != 0) & (stride != 1)
            # the generated C repacks it (tuner/ir/cprint/lanes.py gathered_dims) when the axis moves one
            # index dimension with step 1; else it gathers a vector lane by lane (only in the
            # c += a*b loops tuner/ir/cprint/kernel_loop.py prints; the other vector bodies,
            # tuner/ir/cprint/expr_vector.py, gather it lane by lane)
            moving = [d for d in op.access.dims if d.coef(inner) != 0]
            repack = len(moving) == 1 and moving[0].coef(inner) == 1 and not self.expr.block_reason
            gather.append(strided & repack)
            lane.append(strided & (not repack))
            misaligned = np.maximum(misaligned, self.misaligned(op.access, inner))
        # the output tile's LDM stride along the inner axis (strided: accumulators move lane by lane)
        out_strided = (self.stride_along(self.expr.output, inner, out_box) != 1) & (inner != self.red_axis.name)
        body = None
        if self.expr.block_reason:
            # a body other than c += a*b (tuner/ir/cprint/expr_vector.py) loads what its reads are, per
            # trip of w points (c += a*b bodies keep the register block's rb_o + rb_i loads per u FMAs)
            loads, unaligned = self.body_reads(inner, {op.access.tensor: box for op, box in zip(self.operands, boxes)},
                                               w)
            body = BodyReads(loads, unaligned, np.full(len(w), float(self.fma_per_point)),
                             self.body_output_ops(inner, w))
        return InnerAccess(tuple(gather), tuple(lane), misaligned, out_strided, body)
