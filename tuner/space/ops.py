"""Per-operator geometry: tiled axes, the operands' tile boxes, and how the inner loop touches them.

Every operator is scheduled the same way (output-stationary implicit GEMM): output tiles over the
*row* axes and *col* axes are spread over the CPE mesh, a tiled *reduction* axis is walked in chunks,
and per chunk each CPE fetches the tiles of its input operands, then puts its ``c`` (output) tile when
the reduction is done. Operands come in two groups: group ``a`` depends on no col axis (shareable
along a mesh row: data / A), group ``b`` on col axes (shareable along a mesh column: weights / B).

:class:`OpGeometry` is what the one analysis (tuner/space/analysis.py) asks of an operator: its axes,
its operands and their boxes per tile, whether CPEs may share or keep a box, and how the inner loop
walks each operand. An expression operator answers from its affine accesses
(tuner/space/expr_opgeometry.py); so do the built-in ops, each written as an expression in its spec module,
which adds only what the expression cannot say (tuner/space/gemm.py: dense and batch_matmul's inner
order; tuner/space/conv2d.py: groups' non-affine data index, the padding pre-pass, tile choices).
Arrays are numpy arrays over many configs at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tuner.space.compute import BodyReads
from tuner.task_kind import kind_of
from tuner.workloads import Workload

if TYPE_CHECKING:
    from tuner.expr.expr import Expr


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
    """How the innermost compute loop along one axis walks the operands (decides SIMD and packing)."""

    # per operand: strided along the axis and repackable, so vectorising needs a unit-stride copy
    gather: tuple[np.ndarray, ...]
    # per operand: strided and not repackable, so a vector of it is gathered lane by lane
    # (tuner/ir/cprint/lanes.py gathered_dims)
    lane: tuple[np.ndarray, ...]
    misaligned: float | np.ndarray = 0.0  # share of vector operand loads that start off a vector boundary
    # the output tile is strided along the inner axis: an accumulator vector moves to and from LDM
    # lane by lane (what the generated C does), not as one vector load/store
    out_strided: np.ndarray | bool = False
    # the body's own loads per vector trip (an expression body other than c += a*b); None: the
    # c += a*b register block (tuner/space/compute.py)
    body: BodyReads | None = None


@dataclass(frozen=True)
class PadPrepass:
    """The host's pass before the spawn (a spec module's, tuner/space/conv2d.py): input ``tensor``
    arrives row-major as ``shape`` and the kernel reads it zero-padded by ``pad`` elements at both
    ends of each dimension; the kernel's view may split a dimension of the padded array (conv2d's
    [N, G, C/G, Hp, Wp] of the padded NCHW input), the same elements in the same order."""

    tensor: str
    shape: tuple[int, ...]
    pad: tuple[int, ...]

    @property
    def padded(self) -> tuple[int, ...]:
        return tuple(e + 2 * p for e, p in zip(self.shape, self.pad))

    def bytes(self, dtype_bytes: int) -> int:
        """What the pass moves: the input read and the padded copy written (nothing when unpadded:
        the input is the kernel's)."""
        return (prod(self.shape) + prod(self.padded)) * dtype_bytes if any(self.pad) else 0


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


class OpGeometry(Protocol):
    """What the analysis asks of an operator. Every operator answers as an expression
    (tuner/space/expr_opgeometry.py ExprOpGeometry); an operand is any object with a ``group``: "a" (depends
    on no col axis, shareable along a mesh row) or "b"."""

    expr: Expr  # the operator as an expression (a built-in op's from its spec module)
    axes: tuple[TileAxis, ...]
    row_axes: tuple[str, ...]  # in axes order: the order the mesh flattens row tiles in
    col_axes: tuple[str, ...]
    inner_axes: tuple[str, ...]  # the ``inner`` knob's choices
    operands: tuple[Any, ...]
    red_fixed: int  # untiled reduction extent (a conv's R*S)
    red_innermost: int  # extent of the innermost untiled reduction loop (a conv's S); 0: the tiled one
    prepass_bytes: int  # host-side work before the spawn (padding a conv input)
    prepass: PadPrepass | None  # that work: the input the host pads (None: inputs used as given)
    # indices the op's expression cannot say, as the kernel computes them: (tensor, dim) ->
    # (axis, divisor) for axis // divisor (conv2d's group index; tuner/codegen/te_ops.py)
    index_div: dict[tuple[str, int], tuple[str, int]]
    fma_per_point: int  # P0 instructions per (spatial, reduction) point as the generated C issues them

    @property
    def red_axis(self) -> TileAxis: ...

    # why the space offers simd = 1 alone, acc = "ldm" alone, pack = "none" alone ("": the whole
    # knob; tuner/space/space.py)
    @property
    def scalar_reason(self) -> str: ...

    @property
    def block_reason(self) -> str: ...

    @property
    def pack_reason(self) -> str: ...

    @property
    def ops_per_point(self) -> int:
        """Arithmetic operations per point (a multiply and an add: 2)."""

    @property
    def b_constant(self) -> bool:
        """Group b is a layer's weights, a constant of the compiled model: packing it (the pack
        knob) is done once at compile time; else (batch_matmul's B) the host packs it before each call."""

    @property
    def b_elements(self) -> int:
        """Elements of the group-b operands (what the host packs before each call when not constant)."""

    @property
    def operand_axes(self) -> list[set[str]]:
        """The axes each operand's LDM index moves with: what the register block loads per row or
        per vector (tuner/space/compute.py block_shape)."""

    def group(self, name: str) -> tuple[Any, ...]: ...

    def boxes(self, t: dict[str, AxisTiles]) -> tuple[list[list[Dim]], list[Dim]]:
        """The LDM box of each operand (in ``operands`` order) and of the output, per tile."""

    def tensors(self, t: dict[str, AxisTiles]) -> dict[str, list[Dim]]:
        """The boxes of an op with one operand per group, by group ("a", "b"), and the output's ("c")."""

    def shareable(self, op: Any, t: dict[str, AxisTiles], pr: np.ndarray) -> np.ndarray:
        """Whether the CPEs that would share the operand's tile (a mesh row for group a, a mesh
        column for group b) need the same box."""

    def reusable(self, op: Any, t: dict[str, AxisTiles]) -> np.ndarray:
        """Whether the operand's box is the same for every tile the traversal keeps it across (row
        order keeps group a across col tiles, col order group b across row tiles)."""

    def inner_access(self, inner: str, t: dict[str, AxisTiles], boxes: list[list[Dim]], out_box: list[Dim],
                     w: np.ndarray) -> InnerAccess:
        """How the innermost loop along ``inner`` (``w`` lanes) walks the operands and the output."""


def geometry_for(workload: Workload) -> OpGeometry:
    """The geometry of a workload, from its kind (a built-in op's spec module, an expression's accesses)."""
    geometry: OpGeometry = kind_of(workload).geometry(workload)
    return geometry
