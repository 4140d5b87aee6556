"""The measurement interface every backend implements (simulator, athread emulator, Sunway node)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tuner.space.space import Config
from tuner.targets import Target
from tuner.workloads import Workload

# Statuses a measurement can end in. Everything but "ok" is a failed config: stored, never measured
# again, and learned from as a bad config. A lost worker is not a status: its job is simply retried.
OK = "ok"
FAILURE_STATUSES = ("ldm_overflow", "invalid_config", "compile_error", "runtime_error", "timeout", "wrong_result")
STATUSES = (OK, *FAILURE_STATUSES)
SOURCES = ("simulator", "emulator", "hardware", "host")


@dataclass(frozen=True)
class MeasureResult:
    """One config's measurement: repeated kernel times in seconds, or a failure with its reason."""

    config: Config
    status: str
    times: tuple[float, ...] = ()
    error: str = ""
    source: str = "simulator"
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}; expected one of {SOURCES}")
        if self.status == OK:
            if not self.times:
                raise ValueError("a successful measurement needs at least one time")
            if any(not math.isfinite(t) or t <= 0 for t in self.times):
                raise ValueError(f"times must be finite and positive, got {self.times}")

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def mean_time(self) -> float:
        """Mean kernel time; infinity for a failed config so comparisons need no special case."""
        return sum(self.times) / len(self.times) if self.ok else math.inf


class MeasureBackend(Protocol):
    """Builds and runs configs of one workload on one target and reports their times."""

    source: str

    def measure(self, workload: Workload, target: Target, configs: Sequence[Config]) -> list[MeasureResult]:
        ...
