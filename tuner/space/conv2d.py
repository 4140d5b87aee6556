"""conv2d's spec: the rules a 2-D convolution adds to the one analysis (tuner/space/ops.py OpGeometry).

What an expression of it would not give: the input is padded by the host once (a pre-pass the
simulator charges) and viewed as data[N, G, C/G, Hp, Wp], so grouped and depthwise convolutions index
it through the group k // (K/G) -- not an affine access, hence the data box, its sharing and reuse
and its gather along ``k`` are written here; output-channel tiles hold whole groups or divide one
(``tile_k`` choices); the input channels are the tiled reduction whatever R and S are, R*S whole in
LDM; and the knob order (axes n, oh, ow, k, c; inner ow, k, c) that stored configs and the
cost-model features encode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuner.space.ops import AxisTiles, Dim, InnerAccess, OpGeometry, TileAxis, tile_choices
from tuner.workloads import Conv2d


class Conv2dGeometry(OpGeometry):
    """conv2d NCHW: a = padded data[N, G, C/G, Hp, Wp], b = weight[K, C/G, R, S], c = out[N, K, OH, OW]."""

    workload: Conv2d
    row_axes = ("n", "oh", "ow")
    col_axes = ("k",)

    def __init__(self, workload: Conv2d) -> None:
        self.workload = w = workload
        kpg = w.k // w.groups
        k_choices = tuple(
            c for c in tile_choices(w.k, limit=20) if (c <= kpg and kpg % c == 0) or (c > kpg and c % kpg == 0)
        )
        self.axes = (
            TileAxis("n", w.n, "row", tile_choices(w.n)),
            TileAxis("oh", w.oh, "row", tile_choices(w.oh)),
            TileAxis("ow", w.ow, "row", tile_choices(w.ow)),
            TileAxis("k", w.k, "col", k_choices),
            TileAxis("c", w.c // w.groups, "red", tile_choices(w.c // w.groups)),
        )
        self.inner_axes = ("ow", "k", "c")
        self.red_fixed = w.r * w.s
        self.red_innermost = w.s
        padded = w.pad_h > 0 or w.pad_w > 0
        hp, wp = w.h + 2 * w.pad_h, w.w + 2 * w.pad_w
        # The host pads the input once (as swDNN does): read the input, write the padded copy.
        self.prepass_bytes = (w.n * w.c * (w.h * w.w + hp * wp) * w.dtype_bytes) if padded else 0

    def _input_dim(self, out: AxisTiles, stride: int, span: int, extent: int) -> Dim:
        # The box of output tile i starts at i*t*stride and has the full tile's (t-1)*stride+span
        # rows clipped to the padded input (what TVM's cache_read region gives): only the last tile
        # can be clipped, and for a ragged last tile it may hold a few rows its outputs do not need.
        full = np.minimum((out.full - 1) * stride + span, extent)
        last = np.minimum(full, extent - (out.count - 1) * out.full * stride)
        mean = ((out.count - 1) * full + last) / out.count
        return Dim(full, mean, extent)

    def _groups_per_k_tile(self, t: dict[str, AxisTiles]) -> tuple[np.ndarray, np.ndarray]:
        w = self.workload
        kpg = w.k // w.groups
        full = np.maximum(1.0, t["k"].full / kpg)
        mean = np.where(t["k"].full > kpg, w.groups / t["k"].count, 1.0)
        return full, mean

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        w = self.workload
        g_full, g_mean = self._groups_per_k_tile(t)
        ones = np.ones_like(t["n"].full)
        a = [
            Dim(t["n"].full, t["n"].mean, w.n),
            Dim(g_full, g_mean, w.groups),
            Dim(t["c"].full, t["c"].mean, w.c // w.groups),
            self._input_dim(t["oh"], w.stride_h, w.span_h, w.h + 2 * w.pad_h),
            self._input_dim(t["ow"], w.stride_w, w.span_w, w.w + 2 * w.pad_w),
        ]
        b = [
            Dim(t["k"].full, t["k"].mean, w.k),
            Dim(t["c"].full, t["c"].mean, w.c // w.groups),
            Dim(ones * w.r, ones * w.r, w.r),
            Dim(ones * w.s, ones * w.s, w.s),
        ]
        c = [
            Dim(t["n"].full, t["n"].mean, w.n),
            Dim(t["k"].full, t["k"].mean, w.k),
            Dim(t["oh"].full, t["oh"].mean, w.oh),
            Dim(t["ow"].full, t["ow"].mean, w.ow),
        ]
        return {"a": a, "b": b, "c": c}

    def boxes(self, t: dict[str, AxisTiles]) -> tuple[list[list[Dim]], list[Dim]]:
        boxes = self.tensors(t)
        return [boxes["a"], boxes["b"]], boxes["c"]

    @property
    def operand_axes(self) -> list[set[str]]:
        # data[n, group(k), c, oh*stride + r, ow*stride + s], weight[k, c, r, s]
        return [{"n", "c", "oh", "ow"} | ({"k"} if self.workload.groups > 1 else set()), {"k", "c"}]

    @property
    def b_elements(self) -> int:
        w = self.workload
        return w.k * (w.c // w.groups) * w.r * w.s

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        wl = self.workload
        no = np.zeros_like(t["k"].full, dtype=bool)
        if inner == "ow":
            # the data row is contiguous only at stride 1; at a stride (index ow*stride + s) the
            # generated C gathers it lane by lane (tuner/codegen/simd.py gathered_dims); weights
            # broadcast. Tap s reads the data row s elements past the output's vector start: all
            # taps but those at a multiple of the lanes are unaligned (counted for 4 lanes)
            off = sum(1 for s in range(wl.s) if (s * wl.dil_w) % 4) / wl.s if wl.stride_w == 1 else 0.0
            return InnerAccess((no, no), (no | (wl.stride_w != 1), no), off)
        if inner == "k":
            # weights strided by tc*R*S. The data is a broadcast, except with groups, where its index
            # moves with k through the group k // (K/G): repacked when K/G = 1 (depthwise: the index
            # is k), else gathered lane by lane
            grouped = wl.groups > 1
            return InnerAccess((no | (grouped and wl.k == wl.groups), (t["c"].full * wl.r * wl.s) != 1),
                               (no | (grouped and wl.k != wl.groups), no),
                               out_strided=(t["oh"].full * t["ow"].full) != 1)
        ih = (t["oh"].full - 1) * wl.stride_h + wl.span_h
        iw = (t["ow"].full - 1) * wl.stride_w + wl.span_w
        return InnerAccess(((ih * iw) != 1, no | (wl.r * wl.s != 1)), (no, no))

    def shareable(self, op: Any, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        # With groups, different k tiles read different input channels.
        return np.full_like(pr, op.group == "b" or self.workload.groups == 1, dtype=bool)

    def reusable(self, op: Any, t: dict[str, AxisTiles]) -> np.ndarray:
        if op.group == "b":
            return np.ones_like(t["k"].full, dtype=bool)
        return (t["k"].count == 1) | (self.workload.groups == 1)
