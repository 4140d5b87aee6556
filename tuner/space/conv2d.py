"""conv2d's spec: a 2-D convolution is an expression, plus what its groups and padding add.

``out[n, k, oh, ow] = sum_{c, r, s} data[n, g, c, oh*stride + r*dil, ow*stride + s*dil] * weight[k, c, r, s]``
over the host-padded input viewed as data[N, G, C/G, Hp, Wp] (tuner/codegen/te_ops.py) gives the
geometry as for any expression operator (tuner/space/expr_opgeometry.py: boxes, halos, strides and dilation,
the taps' misalignment, the inner loop's strides). What the spec adds:

* the group index g = k // (K/G) is not affine: with groups, the data box holds the groups of the k
  tile, the data cannot be shared along a mesh row (k tiles read different channels), is kept across
  k tiles only when there is one, and along ``k`` it is repacked when K/G = 1 (depthwise: the index is
  k), else gathered lane by lane; a k tile holds whole groups or divides one (``tile_k`` choices);
* the input channels are the tiled reduction whatever R and S are (R*S stay whole in LDM);
* the host pads the input once before the spawn (a pre-pass the simulator charges);
* the knob order stored configs and the cost-model features encode (axes n, oh, ow, k, c; inner
  ow, k, c).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuner.expr.expr import Access, Axis, AxisKind, DimAccess, Expr, Reducer
from tuner.space.expr_opgeometry import ExprOpGeometry
from tuner.space.ops import AxisTiles, Dim, InnerAccess, PadPrepass, TileAxis, tile_choices
from tuner.workloads import Conv2d

INNER_AXES = ("ow", "k", "c")


def conv2d_expr(w: Conv2d) -> Expr:
    """The expression of a conv2d layer over its padded input, the group index left constant (see
    :meth:`Conv2dGeometry.dims`)."""
    cpg = w.c // w.groups

    def dim(*coefs: tuple[str, int]) -> DimAccess:
        return DimAccess(coefs, 0)

    data = Access("data", (w.n, w.groups, cpg, w.h + 2 * w.pad_h, w.w + 2 * w.pad_w),
                  (dim(("n", 1)), dim(), dim(("c", 1)), dim(("oh", w.stride_h), ("r", w.dil_h)),
                   dim(("ow", w.stride_w), ("s", w.dil_w))))
    weight = Access("weight", (w.k, cpg, w.r, w.s), (dim(("k", 1)), dim(("c", 1)), dim(("r", 1)), dim(("s", 1))))
    out = Access("out", (w.n, w.k, w.oh, w.ow), (dim(("n", 1)), dim(("k", 1)), dim(("oh", 1)), dim(("ow", 1))))
    spatial = tuple(Axis(a, e, AxisKind.SPATIAL) for a, e in (("n", w.n), ("oh", w.oh), ("ow", w.ow), ("k", w.k)))
    reduce = tuple(Axis(a, e, AxisKind.REDUCE) for a, e in (("c", cpg), ("r", w.r), ("s", w.s)))
    return Expr(name=w.op, dtype=w.dtype, axes=spatial + reduce, inputs=(data, weight), output=out,
                reducer=Reducer.SUM, ops_per_point=2, instructions_per_point=1)


class Conv2dGeometry(ExprOpGeometry):
    """The geometry of a conv2d workload: its expression's, with the groups' rules."""

    workload: Conv2d

    def __init__(self, workload: Conv2d) -> None:
        super().__init__(conv2d_expr(workload), tiled="c")
        self.workload = w = workload
        kpg = w.k // w.groups
        k_choices = tuple(
            c for c in tile_choices(w.k, limit=20) if (c <= kpg and kpg % c == 0) or (c > kpg and c % kpg == 0)
        )
        self.axes = tuple(TileAxis(a.name, a.extent, a.role, k_choices) if a.name == "k" else a for a in self.axes)
        self.inner_axes = INNER_AXES
        self.data = self.operands[0]
        self.grouped = w.groups > 1
        # the group index data[:, k // (K/G)] the expression leaves constant, as the kernel computes it
        # (tuner/codegen/te_ops.py): (tensor, dim) -> (axis, divisor)
        self.index_div = {(self.data.access.tensor, 1): ("k", kpg)} if self.grouped else {}
        # The host pads the NCHW input once (as swDNN does): read the input, write the padded copy.
        self.prepass = PadPrepass(self.data.access.tensor, (w.n, w.c, w.h, w.w), (0, 0, w.pad_h, w.pad_w))
        self.prepass_bytes = self.prepass.bytes(w.dtype_bytes)

    def dims(self, acc: Access, t: dict[str, AxisTiles]) -> list[Dim]:
        box = super().dims(acc, t)
        if acc is self.data.access and self.grouped:
            # the groups of the k tile: a tile of whole groups holds several, one dividing a group one
            kpg = self.workload.k // self.workload.groups
            full = np.maximum(1.0, t["k"].full / kpg)
            mean = np.where(t["k"].full > kpg, self.workload.groups / t["k"].count, 1.0)
            box[1] = Dim(full, mean, self.workload.groups)
        return box

    @property
    def operand_axes(self) -> list[set[str]]:
        axes = super().operand_axes
        if self.grouped:
            axes[0] = axes[0] | {"k"}
        return axes

    def shareable(self, op: Any, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        if op is self.data and self.grouped:  # k tiles read different input channels
            return np.zeros_like(pr, dtype=bool)
        return super().shareable(op, t, pr)

    def reusable(self, op: Any, t: dict[str, AxisTiles]) -> np.ndarray:
        if op is self.data and self.grouped:  # the next col tile's k tile reads other channels
            return t["k"].count == 1
        return super().reusable(op, t)

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        acc = super().inner_access(inner, t, boxes, out_box, w)
        if inner != "k" or not self.grouped:
            return acc
        depthwise = self.workload.k == self.workload.groups
        no = np.zeros_like(t["k"].full, dtype=bool)
        return InnerAccess((no | depthwise, *acc.gather[1:]), (no | (not depthwise), *acc.lane[1:]),
                           acc.misaligned, acc.out_strided, acc.body)
