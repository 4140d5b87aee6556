"""The pure-Python description of one tensor expression: axes, affine accesses, reducer, cost per point.

``tuner.expr.parse`` builds it from a TVM PrimFunc; everything downstream (geometry, space, workload)
reads only this, so nothing but the parser needs tvm. An access dimension is ``sum_a coef[a]*a +
offset`` over the iteration axes, widened to ``span`` elements when several loads of one tensor
differ only by constant offsets (a stencil's halo).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from math import prod


class AxisKind(str, Enum):
    SPATIAL = "spatial"
    REDUCE = "reduce"


class Reducer(str, Enum):
    NONE = "none"  # element-wise (a stencil): no reduction axis
    SUM = "sum"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int
    kind: AxisKind


@dataclass(frozen=True)
class DimAccess:
    """One index dimension of an access: integer affine coefficients per axis, the lowest offset and
    the number of consecutive elements the accesses cover at a fixed point (1 + halo)."""

    coefs: tuple[tuple[str, int], ...]  # (axis name, coefficient) for non-zero coefficients
    offset: int
    span: int = 1

    def coef(self, axis: str) -> int:
        return dict(self.coefs).get(axis, 0)

    @property
    def axes(self) -> frozenset[str]:
        return frozenset(a for a, _ in self.coefs)


@dataclass(frozen=True)
class Access:
    """A tensor (input or output) and how the expression indexes it."""

    tensor: str
    shape: tuple[int, ...]
    dims: tuple[DimAccess, ...]

    @property
    def axes(self) -> frozenset[str]:
        return frozenset().union(*(d.axes for d in self.dims)) if self.dims else frozenset()

    @property
    def elements(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class Expr:
    """One ``te.compute``: output[spatial axes] = reduce over reduction axes of f(inputs)."""

    name: str
    dtype: str
    axes: tuple[Axis, ...]
    inputs: tuple[Access, ...]
    output: Access
    reducer: Reducer
    ops_per_point: int  # arithmetic operations per (spatial, reduction) point, the accumulation included
    # CPE instructions per point as the generated C issues them (a multiply feeding an add is one FMA,
    # max/min a compare and a select, a libm call its cost); 0: not profiled (half the operations)
    instructions_per_point: int = 0
    # why the body's innermost loop prints scalar C (no vector form of some node); "" = vectorisable
    scalar_reason: str = ""
    # why the register-block micro-kernel (acc = "reg") cannot print the body; "" = it can (c += a*b)
    block_reason: str = ""
    # every load of an input in the body, in order, duplicates kept (a stencil's five taps of X are five
    # reads; ``inputs`` merges them into one box): the operand loads the vector C issues per point
    # (tuner/ir/cprint/expr_vector.py); empty: one read per input
    reads: tuple[Access, ...] = ()

    @property
    def spatial(self) -> tuple[Axis, ...]:
        return tuple(a for a in self.axes if a.kind is AxisKind.SPATIAL)

    @property
    def reduce(self) -> tuple[Axis, ...]:
        return tuple(a for a in self.axes if a.kind is AxisKind.REDUCE)

    @property
    def gemm_like(self) -> bool:
        """Two or more inputs read inside the reduction (a product summed: GEMM, conv, einsum); the
        others (element-wise, a single-input reduction, a copy) are memory-bound."""
        reduce = {a.name for a in self.reduce}
        return sum(1 for acc in self.inputs if acc.axes & reduce) >= 2

    @property
    def points(self) -> int:
        return prod(a.extent for a in self.axes)

    @property
    def flops(self) -> int:
        return self.points * self.ops_per_point
