"""The built-in GEMM-like operators (conv2d incl. depthwise, dense, batch_matmul) as a kind of task.

Each is a frozen dataclass of tuner.workloads; its geometry is written by its spec module
(tuner/space/conv2d.py, tuner/space/gemm.py) as an expression plus what the expression cannot say,
and its kernel PrimFunc is that expression's ``te.compute`` (tuner.codegen.te_ops.builtin_op).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.codegen.te_ops import OpDef, builtin_op
from tuner.kinds.gemm_like import GemmLikeKind
from tuner.space.conv2d import Conv2dGeometry
from tuner.space.gemm import GemmGeometry
from tuner.space.ops import OpGeometry
from tuner.workloads import WORKLOAD_TYPES, BatchMatmul, Conv2d, Dense, Workload, builtin_from_json


class BuiltinKind(GemmLikeKind):
    name = "builtin"
    ops = tuple(WORKLOAD_TYPES)

    def from_json(self, op: str, spec: Mapping[str, Any]) -> Workload:
        return builtin_from_json(op, dict(spec))

    def geometry(self, workload: Workload) -> OpGeometry:
        if isinstance(workload, Conv2d):
            return Conv2dGeometry(workload)
        assert isinstance(workload, (Dense, BatchMatmul))
        return GemmGeometry(workload)

    def tensor_program(self, workload: Workload) -> OpDef:
        return builtin_op(workload)


KIND = BuiltinKind()
