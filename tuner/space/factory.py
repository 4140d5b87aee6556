"""The one place every layer gets a workload's schedule space: the workload's kind builds it.

Search, the simulator, the emulator, codegen, the service's driver and validation and the benchmarks
call :func:`space_for`, never a space class; the kind (tuner.task_kind) decides which space it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.targets import Target
from tuner.task_kind import kind_of
from tuner.workloads import Workload


def space_for(workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None = None) -> Any:
    """The schedule space of ``workload`` on ``target`` (a ``ScheduleSpace`` for the GEMM-like kinds)."""
    return kind_of(workload).space(workload, target, restrict)
