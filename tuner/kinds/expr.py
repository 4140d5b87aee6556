"""Operators written as tensor expressions (op ``expr``) as a kind of task.

The workload carries the operator's TVMScript (tuner.expr.workload.ExprWorkload); its geometry is
derived from the expression's affine accesses (ExprOpGeometry), its space is an ExprSpace (a
ScheduleSpace that names its kind), and its kernel PrimFunc is rebuilt from the script. An expression
that is not GEMM-like (element-wise, a single-input reduction, a copy) is memory-bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.codegen.te_ops import OpDef, expr_op
from tuner.expr.workload import OP, ExprWorkload
from tuner.kinds.gemm_like import GemmLikeKind
from tuner.space.expr_opgeometry import ExprOpGeometry
from tuner.space.expr_space import ExprSpace
from tuner.targets import Target
from tuner.workloads import Workload


class ExprKind(GemmLikeKind):
    name = "expr"
    ops = (OP,)

    def from_json(self, op: str, spec: Mapping[str, Any]) -> Workload:
        return ExprWorkload.from_json({"op": op, **spec})

    def memory_bound(self, workload: Workload) -> bool:
        assert isinstance(workload, ExprWorkload)
        return not workload.expr.gemm_like

    def space(self, workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None) -> ExprSpace:
        assert isinstance(workload, ExprWorkload)
        return ExprSpace(workload, target, restrict)

    def geometry(self, workload: Workload) -> ExprOpGeometry:
        assert isinstance(workload, ExprWorkload)
        return ExprOpGeometry(workload.expr)

    def tensor_program(self, workload: Workload) -> OpDef:
        return expr_op(workload)


KIND = ExprKind()
