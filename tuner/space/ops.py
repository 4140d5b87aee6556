"""Per-operator geometry: tiled axes, the tensors' tile boxes, and how the inner loop touches them.

Every operator is scheduled the same way (output-stationary implicit GEMM): output tiles over the
*row* axes and *col* axes are spread over the CPE mesh, a tiled *reduction* axis is walked in chunks,
and per chunk each CPE fetches an ``a`` tile (depends on row axes: data / A) and a ``b`` tile
(depends on col axes: weights / B), then puts its ``c`` (output) tile when the reduction is done.
An op only has to say which axes it has and which box of each tensor a tile needs; the analysis does
the rest. Arrays here are numpy arrays over many configs at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.workloads import BatchMatmul, Conv2d, Dense, Workload


@dataclass(frozen=True)
class TileAxis:
    name: str
    extent: int
    role: str  # "row" | "col" | "red"
    choices: tuple[int, ...]


@dataclass(frozen=True)
class AxisTiles:
    """Vectorized per-axis tiling: full tile size, number of tiles and mean tile extent (ragged last)."""

    full: np.ndarray
    count: np.ndarray
    mean: np.ndarray


@dataclass(frozen=True)
class Dim:
    """One dimension of a tensor tile: the LDM box extent, its mean over tiles, the tensor's extent."""

    full: np.ndarray
    mean: np.ndarray
    extent: int


@dataclass(frozen=True)
class InnerAccess:
    """How the innermost compute loop walks the operands (decides SIMD, packing and reductions)."""

    a_gather: np.ndarray  # a is strided along the inner axis: vectorizing needs a packed copy
    b_gather: np.ndarray
    reduction: bool  # the inner axis is a reduction: lanes are summed at the end of each run
    extent: np.ndarray  # full tile extent of the inner axis
    misaligned: float = 0.0  # share of the vector operand's loads that start off a vector boundary
    # the output tile is strided along the inner axis: an accumulator vector moves to and from LDM
    # lane by lane (what the generated C does), not as one vector load/store
    out_strided: np.ndarray | None = None


def tile_choices(extent: int, limit: int = 16) -> tuple[int, ...]:
    """Tile sizes for an axis: powers of two, divisors and the extent itself (ragged tiles allowed).

    Divisors avoid ragged tiles, powers of two match SIMD and 128-B lines; when an axis has many of
    both, the list is thinned to keep the space searchable. Built in O(sqrt(extent)) steps (a
    factorisation), so a huge extent cannot stall space construction.
    """
    candidates = {extent}
    p = 1
    while p < extent:
        candidates.add(p)
        p *= 2
    # Divisors from the prime factorisation: O(sqrt(extent)) trial division, never a loop over the extent.
    factors: dict[int, int] = {}
    rest, f = extent, 2
    while f * f <= rest:
        while rest % f == 0:
            factors[f] = factors.get(f, 0) + 1
            rest //= f
        f += 1 if f == 2 else 2
    if rest > 1:
        factors[rest] = factors.get(rest, 0) + 1
    divisors = [1]
    for prime, power in factors.items():
        divisors = [d * prime**e for d in divisors for e in range(power + 1)]
    candidates.update(divisors)
    values = sorted(candidates)
    if len(values) > limit:
        keep = {values[0], values[-1]}
        keep.update(v for v in values if v & (v - 1) == 0)  # powers of two first
        others = [v for v in values if v not in keep]
        while len(keep) < limit and others:
            keep.add(others.pop(len(others) // 2))
        values = sorted(keep)[: max(limit, 2)] if len(keep) > limit else sorted(keep)
        if extent not in values:
            values[-1] = extent
    return tuple(values)


def axis_tiles(extent: int, full: np.ndarray) -> AxisTiles:
    full = np.minimum(full, extent)
    count = np.ceil(extent / full)
    return AxisTiles(full=full, count=count, mean=extent / count)


def _ones(t: AxisTiles) -> np.ndarray:
    return np.ones_like(t.full)


class OpGeometry:
    """Base: subclasses set ``axes``, ``inner_axes`` and implement the tensor boxes."""

    workload: Workload
    axes: tuple[TileAxis, ...]
    inner_axes: tuple[str, ...]
    red_fixed: int = 1  # untiled reduction extent (a conv's R*S)
    red_innermost: int = 0  # extent of the innermost untiled reduction loop (a conv's S); 0: the tiled one
    prepass_bytes: int = 0  # host-side work before the spawn (padding a conv input)
    # b is a layer's weights, a constant of the compiled model: packing it (the pack knob) is done
    # once at compile time. batch_matmul's b is an activation: the host packs it before each call.
    b_constant: bool = True

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        raise NotImplementedError

    def inner_access(self, inner: str, t: dict[str, AxisTiles]) -> InnerAccess:
        raise NotImplementedError

    def a_shareable(self, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        """Whether CPEs of one mesh row (same row tile, different col tiles) need the same ``a`` tile."""
        return np.ones_like(pr, dtype=bool)

    def b_shareable(self, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        return np.ones_like(pr, dtype=bool)

    def a_reusable(self, t: dict[str, AxisTiles]) -> np.ndarray:
        """Whether ``a``'s box is the same for every col tile (so row order may keep it in LDM)."""
        return np.ones_like(t[self.red_axis.name].full, dtype=bool)

    def b_reusable(self, t: dict[str, AxisTiles]) -> np.ndarray:
        """Whether ``b``'s box is the same for every row tile (so col order may keep it in LDM)."""
        return np.ones_like(t[self.red_axis.name].full, dtype=bool)

    @property
    def red_axis(self) -> TileAxis:
        return next(a for a in self.axes if a.role == "red")


class GemmGeometry(OpGeometry):
    """dense and batch_matmul: a[(b),m,k], b[(b),n,k], c[(b),m,n]."""

    workload: Dense | BatchMatmul

    def __init__(self, workload: Dense | BatchMatmul) -> None:
        self.workload = workload
        w = workload
        batch = (TileAxis("b", w.b, "row", tile_choices(w.b)),) if isinstance(w, BatchMatmul) else ()
        self.axes = batch + (
            TileAxis("m", w.m, "row", tile_choices(w.m)),
            TileAxis("n", w.n, "col", tile_choices(w.n)),
            TileAxis("k", w.k, "red", tile_choices(w.k)),
        )
        self.inner_axes = ("n", "k", "m")
        self.b_constant = not isinstance(w, BatchMatmul)

    def _batch(self, t: dict[str, AxisTiles]) -> list[Dim]:
        w = self.workload
        if "b" not in t or not isinstance(w, BatchMatmul):  # only a batch_matmul has the b axis
            return []
        return [Dim(t["b"].full, t["b"].mean, w.b)]

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        w = self.workload
        m = Dim(t["m"].full, t["m"].mean, w.m)
        n = Dim(t["n"].full, t["n"].mean, w.n)
        k = Dim(t["k"].full, t["k"].mean, w.k)
        return {"a": self._batch(t) + [m, k], "b": self._batch(t) + [n, k], "c": self._batch(t) + [m, n]}

    def inner_access(self, inner: str, t: dict[str, AxisTiles]) -> InnerAccess:
        no = np.zeros_like(t["k"].full, dtype=bool)
        k_is_one = t["k"].full == 1
        if inner == "n":  # a broadcast (loade), b[n,k] strided by tk along n
            return InnerAccess(no, ~k_is_one, False, t["n"].full)
        if inner == "k":  # both contiguous along k, lanes reduced at the end
            return InnerAccess(no, no, True, t["k"].full)
        # inner m: a strided by tk, the output by tn
        return InnerAccess(~k_is_one, no, False, t["m"].full, out_strided=t["n"].full != 1)

    def b_shareable(self, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        if "b" not in t:
            return np.ones_like(pr, dtype=bool)
        # CPEs of one mesh column work on row tiles w*pr .. w*pr+pr-1 at once; they need the same
        # b tile only if those row tiles share the batch index, i.e. pr divides the m-tile count.
        return np.mod(t["m"].count, pr) == 0

    def b_reusable(self, t: dict[str, AxisTiles]) -> np.ndarray:
        if "b" not in t:
            return np.ones_like(t["k"].full, dtype=bool)
        return t["b"].count == 1  # b[B,N,K] follows the batch of the row tile


class Conv2dGeometry(OpGeometry):
    """conv2d NCHW: a = padded data[N, G, C/G, Hp, Wp], b = weight[K, C/G, R, S], c = out[N, K, OH, OW]."""

    workload: Conv2d

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
        ones = _ones(t["n"])
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

    def inner_access(self, inner: str, t: dict[str, AxisTiles]) -> InnerAccess:
        w = self.workload
        no = np.zeros_like(t["k"].full, dtype=bool)
        if inner == "ow":  # data row contiguous only at stride 1; weights broadcast
            # tap s reads the data row s elements past the output's vector start: all taps but
            # those at a multiple of the lanes are unaligned (counted for 4 lanes, the common case)
            off = sum(1 for s in range(w.s) if (s * w.dil_w) % 4) / w.s if w.stride_w == 1 else 0.0
            return InnerAccess(no | (w.stride_w != 1), no, False, t["ow"].full, off)
        if inner == "k":  # data broadcast; weights strided by tc*R*S
            return InnerAccess(no, (t["c"].full * w.r * w.s) != 1, False, t["k"].full,
                               out_strided=(t["oh"].full * t["ow"].full) != 1)
        ih = (t["oh"].full - 1) * w.stride_h + w.span_h
        iw = (t["ow"].full - 1) * w.stride_w + w.span_w
        return InnerAccess((ih * iw) != 1, no | (w.r * w.s != 1), True, t["c"].full)

    def a_shareable(self, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        # With groups, different k tiles read different input channels.
        return np.full_like(pr, self.workload.groups == 1, dtype=bool)

    def a_reusable(self, t: dict[str, AxisTiles]) -> np.ndarray:
        return (t["k"].count == 1) | (self.workload.groups == 1)


def geometry_for(workload: Workload) -> OpGeometry:
    if isinstance(workload, Conv2d):
        return Conv2dGeometry(workload)
    if isinstance(workload, (Dense, BatchMatmul)):
        return GemmGeometry(workload)
    raise TypeError(f"no schedule space for {type(workload).__name__}")
