"""dense and batch_matmul's spec: one expression each, analysed as any expression operator.

``C[(b,) m, n] = sum_k A[(b,) m, k] * B[(b,) n, k]`` gives the geometry (tuner/space/expr_opgeometry.py:
roles, boxes, sharing, reuse, the inner loop's strides), exactly what the hand-written GEMM rules
gave. The spec keeps one thing of its own: the ``inner`` choices n, k, m in that order (no inner
batch loop), which the built-in codegen prints and stored configs and the cost-model features encode.
"""

from __future__ import annotations

from tuner.expr.expr import Access, Axis, AxisKind, DimAccess, Expr, Reducer
from tuner.space.expr_opgeometry import ExprOpGeometry
from tuner.workloads import BatchMatmul, Dense

INNER_AXES = ("n", "k", "m")


def gemm_expr(workload: Dense | BatchMatmul) -> Expr:
    """The expression of a dense (``data[m, k]``, ``weight[n, k]``) or batch_matmul (``A[b, m, k]``,
    ``B[b, n, k]``) layer: one FMA per point."""
    w = workload
    batch = ("b",) if isinstance(w, BatchMatmul) else ()
    extent = {"b": w.b if isinstance(w, BatchMatmul) else 1, "m": w.m, "n": w.n, "k": w.k}

    def access(tensor: str, axes: tuple[str, ...]) -> Access:
        return Access(tensor, tuple(extent[a] for a in axes), tuple(DimAccess(((a, 1),), 0) for a in axes))

    a_name, b_name = ("A", "B") if batch else ("data", "weight")
    spatial = tuple(Axis(a, extent[a], AxisKind.SPATIAL) for a in (*batch, "m", "n"))
    return Expr(
        name=w.op, dtype=w.dtype, axes=spatial + (Axis("k", w.k, AxisKind.REDUCE),),
        inputs=(access(a_name, (*batch, "m", "k")), access(b_name, (*batch, "n", "k"))),
        output=access("C", (*batch, "m", "n")), reducer=Reducer.SUM, ops_per_point=2, instructions_per_point=1,
    )


class GemmGeometry(ExprOpGeometry):
    """The geometry of a dense or batch_matmul workload."""

    def __init__(self, workload: Dense | BatchMatmul) -> None:
        super().__init__(gemm_expr(workload))
        self.inner_axes = INNER_AXES
