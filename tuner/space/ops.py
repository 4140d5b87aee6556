"""Per-operator geometry: tiled axes, the operands' tile boxes, and how the inner loop touches them.

Every operator is scheduled the same way (output-stationary implicit GEMM): output tiles over the
*row* axes and *col* axes are spread over the CPE mesh, a tiled *reduction* axis is walked in chunks,
and per chunk each CPE fetches the tiles of its input operands, then puts its ``c`` (output) tile when
the reduction is done. Operands come in two groups: group ``a`` depends on no col axis (shareable
along a mesh row: data / A), group ``b`` on col axes (shareable along a mesh column: weights / B).

:class:`OpGeometry` is what the one analysis (tuner/space/analysis.py) asks of an operator: its axes,
its operands and their boxes per tile, whether CPEs may share or keep a box, and how the inner loop
walks each operand. An expression operator answers from its affine accesses
(tuner/expr/opgeometry.py); a built-in op here, from its own rules (conv2d's groups, padding pre-pass
and tile choices, :class:`Conv2dGeometry`). Arrays are numpy arrays over many configs at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.space.compute import BodyReads
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
class Operand:
    """A built-in op's input operand: its name and group (an expression's is tuner/expr/geometry.py's)."""

    name: str
    group: str  # "a" | "b"


@dataclass(frozen=True)
class InnerAccess:
    """How the innermost compute loop along one axis walks the operands (decides SIMD and packing)."""

    # per operand: strided along the axis and repackable, so vectorising needs a unit-stride copy
    gather: tuple[np.ndarray, ...]
    # per operand: strided and not repackable, so a vector of it is gathered lane by lane
    # (tuner/codegen/simd.py gathered_dims)
    lane: tuple[np.ndarray, ...]
    misaligned: float | np.ndarray = 0.0  # share of vector operand loads that start off a vector boundary
    # the output tile is strided along the inner axis: an accumulator vector moves to and from LDM
    # lane by lane (what the generated C does), not as one vector load/store
    out_strided: np.ndarray | bool = False
    # the body's own loads per vector trip (an expression body other than c += a*b); None: the
    # c += a*b register block (tuner/space/compute.py)
    body: BodyReads | None = None


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
    """What the analysis asks of an operator (subclasses set ``axes``, ``inner_axes``, ``operands``).

    The methods taking an operand accept any object with a ``group`` ("a" or "b"): a built-in op's
    :class:`Operand` or an expression's (tuner/expr/geometry.py)."""

    workload: Any
    axes: tuple[TileAxis, ...]
    row_axes: tuple[str, ...]  # in axes order: the order the mesh flattens row tiles in
    col_axes: tuple[str, ...]
    inner_axes: tuple[str, ...]
    operands: tuple[Any, ...] = (Operand("a", "a"), Operand("b", "b"))
    red_fixed: int = 1  # untiled reduction extent (a conv's R*S)
    red_innermost: int = 0  # extent of the innermost untiled reduction loop (a conv's S); 0: the tiled one
    prepass_bytes: int = 0  # host-side work before the spawn (padding a conv input)
    fma_per_point: int = 1  # P0 instructions per (spatial, reduction) point: one FMA
    ops_per_point: int = 2  # arithmetic operations per point (a multiply and an add)
    # b is a layer's weights, a constant of the compiled model: packing it (the pack knob) is done
    # once at compile time. batch_matmul's b is an activation: the host packs it before each call.
    b_constant: bool = True

    @property
    def red_axis(self) -> TileAxis:
        return next(a for a in self.axes if a.role == "red")

    def group(self, name: str) -> tuple[Any, ...]:
        return tuple(op for op in self.operands if op.group == name)

    def boxes(self, t: dict[str, AxisTiles]) -> tuple[list[list[Dim]], list[Dim]]:
        """The LDM box of each operand (in ``operands`` order) and of the output, per tile."""
        raise NotImplementedError

    @property
    def operand_axes(self) -> list[set[str]]:
        """The axes each operand's LDM index moves with: what the register block loads per row or
        per vector (tuner/space/compute.py block_shape)."""
        raise NotImplementedError

    @property
    def b_elements(self) -> int:
        """Elements of the group-b operands (what the host packs before each call when not constant)."""
        raise NotImplementedError

    def shareable(self, op: Any, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        """Whether the CPEs that would share the operand's tile (a mesh row for group a, a mesh
        column for group b) need the same box."""
        return np.ones_like(pr, dtype=bool)

    def reusable(self, op: Any, t: dict[str, AxisTiles]) -> np.ndarray:
        """Whether the operand's box is the same for every tile the traversal keeps it across (row
        order keeps group a across col tiles, col order group b across row tiles)."""
        return np.ones_like(t[self.red_axis.name].full, dtype=bool)

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        """How the innermost loop along ``inner`` (``w`` lanes) walks the operands and the output."""
        raise NotImplementedError


class BuiltinGeometry(OpGeometry):
    """A built-in op: one ``a`` and one ``b`` operand whose boxes :meth:`tensors` names."""

    @property
    def row_axes(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(a.name for a in self.axes if a.role == "row")

    @property
    def col_axes(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(a.name for a in self.axes if a.role == "col")

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        raise NotImplementedError

    def boxes(self, t: dict[str, AxisTiles]) -> tuple[list[list[Dim]], list[Dim]]:
        boxes = self.tensors(t)
        return [boxes["a"], boxes["b"]], boxes["c"]


class GemmGeometry(BuiltinGeometry):
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

    @property
    def operand_axes(self) -> list[set[str]]:
        batch = {"b"} & {a.name for a in self.axes}
        return [batch | {"m", "k"}, batch | {"n", "k"}]

    @property
    def b_elements(self) -> int:
        w = self.workload
        return (w.b if isinstance(w, BatchMatmul) else 1) * w.n * w.k

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        no = np.zeros_like(t["k"].full, dtype=bool)
        k_is_one = t["k"].full == 1
        if inner == "n":  # a broadcast (loade), b[n,k] strided by tk along n
            return InnerAccess((no, ~k_is_one), (no, no))
        if inner == "k":  # both contiguous along k, lanes reduced at the end
            return InnerAccess((no, no), (no, no))
        # inner m: a strided by tk, the output by tn
        return InnerAccess((~k_is_one, no), (no, no), out_strided=t["n"].full != 1)

    def shareable(self, op: Any, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        if op.group == "a" or "b" not in t:
            return np.ones_like(pr, dtype=bool)
        # CPEs of one mesh column work on row tiles w*pr .. w*pr+pr-1 at once; they need the same
        # b tile only if those row tiles share the batch index, i.e. pr divides the m-tile count.
        return np.mod(t["m"].count, pr) == 0

    def reusable(self, op: Any, t: dict[str, AxisTiles]) -> np.ndarray:
        if op.group == "a" or "b" not in t:
            return np.ones_like(t["k"].full, dtype=bool)
        return t["b"].count == 1  # b[B,N,K] follows the batch of the row tile


class Conv2dGeometry(BuiltinGeometry):
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


def geometry_for(workload: Workload) -> BuiltinGeometry:
    if isinstance(workload, Conv2d):
        return Conv2dGeometry(workload)
    if isinstance(workload, (Dense, BatchMatmul)):
        return GemmGeometry(workload)
    raise TypeError(f"no schedule space for {type(workload).__name__}")
