"""The one place that picks a workload's schedule space: built-in ops and expression operators.

Everything that needs the space of a (workload, target) -- search, simulator, emulator, codegen, the
service's driver and validation, the benchmarks -- calls :func:`space_for`, never a space class, so a
new kind of workload is hooked in here once. ``tuner.expr`` builds on ``tuner.space``, so the
expression space is imported lazily (no import cycle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.space.space import ScheduleSpace
from tuner.targets import Target
from tuner.workloads import EXPR_OP, Workload


def space_for(workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None = None) -> ScheduleSpace:
    """The schedule space of ``workload`` on ``target`` (an ``ExprSpace`` for an expression operator)."""
    if workload.op == EXPR_OP:
        from tuner.expr.space import ExprSpace
        from tuner.expr.workload import ExprWorkload

        assert isinstance(workload, ExprWorkload)
        return ExprSpace(workload, target, restrict)
    return ScheduleSpace(workload, target, restrict)
