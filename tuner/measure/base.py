"""The measurement protocol every backend implements (simulator, athread emulator, Sunway node), the
names its results use (:class:`Status`, :class:`Source`) and the one way a backend says "I cannot
measure here" (:class:`InfrastructureError`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from tuner.errors import SwtuneError
from tuner.space.space import Config
from tuner.targets import Target
from tuner.workloads import Workload


class Status(StrEnum):
    """How a measurement ended. Everything but OK is a failed config: stored, never measured again, and
    learned from as a bad config. A machine that cannot measure is not a status (see InfrastructureError).
    The values are what the database and the wire store."""

    OK = "ok"
    LDM_OVERFLOW = "ldm_overflow"
    INVALID_CONFIG = "invalid_config"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"


class Source(StrEnum):
    """What produced a time: the model, the x86 athread emulator, a Sunway node, or the host CPU."""

    SIMULATOR = "simulator"
    EMULATOR = "emulator"
    HARDWARE = "hardware"
    HOST = "host"


OK = Status.OK
FAILURE_STATUSES: tuple[str, ...] = tuple(s.value for s in Status if s is not Status.OK)
STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
SOURCES: tuple[str, ...] = tuple(s.value for s in Source)


class InfrastructureError(SwtuneError, RuntimeError):
    """This machine cannot measure: the toolchain, the emulator or the batch scheduler is missing or broken.

    It says nothing about a config, so nothing is stored: a worker hands its jobs back for another
    worker and stops. ``completed`` holds the results a ``measure`` call finished before it failed,
    which are genuine and may be kept.
    """

    def __init__(self, message: str, completed: Sequence[MeasureResult] = ()) -> None:
        super().__init__(message)
        self.completed: tuple[MeasureResult, ...] = tuple(completed)


@dataclass(frozen=True)
class MeasureResult:
    """One config's measurement: repeated kernel times in seconds, or a failure with its reason."""

    config: Config
    status: Status
    times: tuple[float, ...] = ()
    error: str = ""
    source: Source = Source.SIMULATOR
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Plain strings (a result read back from the wire) become the enum members they name.
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}; expected one of {SOURCES}")
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "source", Source(self.source))
        if self.status is Status.OK:
            if not self.times:
                raise ValueError("a successful measurement needs at least one time")
            if any(not math.isfinite(t) or t <= 0 for t in self.times):
                raise ValueError(f"times must be finite and positive, got {self.times}")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def mean_time(self) -> float:
        """Mean kernel time; infinity for a failed config so comparisons need no special case."""
        return sum(self.times) / len(self.times) if self.ok else math.inf


@runtime_checkable
class MeasureBackend(Protocol):
    """Builds and runs configs of one workload on one target and reports their times.

    ``source`` names what produces the times (the service checks it against the worker's backend);
    ``chunk`` is how many configs one ``measure`` call should take: one for a backend that builds and
    runs each config (seconds to minutes), many for the model. A worker leases one chunk by default and
    checks for a stop request between chunks. ``preflight`` raises :class:`InfrastructureError` when
    nothing could be measured on this machine. ``measure`` returns one result per config, in order;
    a config's failure is a result, and only a machine's failure raises (InfrastructureError).
    """

    @property
    def source(self) -> Source: ...

    @property
    def chunk(self) -> int: ...

    def preflight(self) -> None: ...

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        ...
