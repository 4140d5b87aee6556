"""The one place that picks a workload's schedule space: built-in ops and expression operators.

Everything that needs the space of a (workload, target) -- search, simulator, emulator, codegen, the
service's driver and validation, the benchmarks -- calls :func:`space_for`, never a space class, so a
new kind of workload is hooked in here once (memory-bound CPE kernels: tuner.cpe.space). ``tuner.expr``
and ``tuner.cpe`` build on ``tuner.space``, so their spaces are imported lazily (no import cycle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.errors import InvalidConfigError
from tuner.space.space import ScheduleSpace
from tuner.targets import Target
from tuner.workloads import CPE_KERNEL_OP, EXPR_OP, Workload


def space_for(workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None = None) -> Any:
    """The schedule space of ``workload`` on ``target``: a ``ScheduleSpace`` (an ``ExprSpace`` for an
    expression operator), or a ``tuner.cpe.space.CpeKernelSpace`` for a memory-bound CPE kernel."""
    if workload.op == CPE_KERNEL_OP:
        from tuner.cpe.space import CpeKernelSpace
        from tuner.cpe.workload import CpeKernelWorkload

        assert isinstance(workload, CpeKernelWorkload)
        if restrict:
            raise InvalidConfigError("a cpe_kernel space takes no restriction")
        return CpeKernelSpace(workload, target)
    if workload.op == EXPR_OP:
        from tuner.expr.space import ExprSpace
        from tuner.expr.workload import ExprWorkload

        assert isinstance(workload, ExprWorkload)
        return ExprSpace(workload, target, restrict)
    return ScheduleSpace(workload, target, restrict)
