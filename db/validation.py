"""The one validation of a measurement, used by the result routes (through db.results), the
records import and the store alike: nothing reaches the measurements table without passing it.

It checks the config against the schedule space of its workload and target (every knob, nothing
else, each value one of the knob's choices with the same JSON type), the times (numbers, finite,
positive, above the physical floor of the workload on the target and below a ceiling), the mean
(computed so it cannot overflow), the status and source names, and the size and depth of the free
``details`` object and the lengths of the string fields the columns bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from db.errors import InvalidInputError
from tuner.backends.registry import BACKENDS, source_of
from tuner.errors import InvalidConfigError, UnknownTargetError
from tuner.measure.base import OK, SOURCES, STATUSES
from tuner.space.factory import space_for
from tuner.space.space import ScheduleSpace, config_hash
from tuner.targets import get_target
from tuner.workloads import Workload

MAX_TIMES = 1000
MAX_ERROR_CHARS = 20_000
MAX_WORKER_CHARS = 128  # measurements.worker and workers.name are String(128)
MAX_DETAILS_BYTES = 64 * 1024
MAX_DETAILS_DEPTH = 8
MAX_PROFILE_VERSION = 2**31 - 1  # measurements.profile_version is an int4
# No single kernel launch takes a day; a larger "time" is a unit mix-up or junk.
MAX_TIME_S = 86_400.0
# A time no clock can read, whatever the workload.
MIN_TIME_S = 1e-9


@dataclass(frozen=True)
class CheckedMeasurement:
    """A measurement that passed every check, in the form the measurements table stores."""

    config: dict[str, Any]
    config_hash: str
    status: str
    times: tuple[float, ...]
    mean_time: float | None  # None for failed configs
    error: str
    source: str
    details: dict[str, Any]
    worker: str
    profile_version: int | None = None  # simulated times: the simulator profile they came from


def check_profile_version(source: str, details: dict[str, Any]) -> int | None:
    """The profile version a simulated result names in its details (0, the built-in profile, when it names
    none: results from before profiles existed); None for every other source."""
    if source != "simulator":
        return None
    version = details.get("profile_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_PROFILE_VERSION:
        raise InvalidInputError(f"details.profile_version must be an integer in [0, {MAX_PROFILE_VERSION}], "
                                f"got {str(version)[:64]}")
    return version


@lru_cache(maxsize=512)
def _space(workload: Workload, target: str) -> ScheduleSpace:
    return space_for(workload, target)


def time_floor(workload: Workload, target: str) -> float:
    """The shortest time physically possible: the workload's FLOPs at the core group's peak."""
    return max(MIN_TIME_S, workload.flops / get_target(target).peak_flops(workload.dtype))


def mean(times: tuple[float, ...]) -> float:
    """Mean that cannot overflow: each term is divided first, and fsum adds exactly."""
    n = len(times)
    return math.fsum(t / n for t in times)


def _same_type(value: Any, choice: Any) -> bool:
    # JSON true is not 1, and 1.0 is not the integer tile 1: a knob value must be the choice itself.
    return type(value) is type(choice) and value == choice


def check_config(workload: Workload, target: str, config: Any) -> dict[str, Any]:
    """The config as a point of the (workload, target) space, or InvalidInputError saying why not."""
    if not isinstance(config, Mapping) or not config:
        raise InvalidInputError("config must be a non-empty JSON object")
    try:
        space = _space(workload, target)
    except (InvalidConfigError, UnknownTargetError, ValueError) as exc:
        raise InvalidInputError(f"no schedule space for {workload.key} on {target}: {exc}") from None
    unknown = sorted(str(k) for k in config if k not in space.knob_index)
    # A knob added after configs were stored declares what a config without it means (its default):
    # records exported before it existed still import, completed with that default.
    config = {**{k.name: k.default for k in space.knobs if k.default is not None and k.name not in config},
              **config}
    missing = sorted(k for k in space.knob_index if k not in config)
    if unknown or missing:
        raise InvalidInputError(f"config is not a point of the {workload.op} space on {target}: "
                                f"unknown knobs {unknown[:10]}, missing knobs {missing}")
    for knob in space.knobs:
        value = config[knob.name]
        if not any(_same_type(value, c) for c in knob.choices):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise InvalidInputError(f"config {knob.name}={shown} is not one of the knob's choices "
                                    f"{list(knob.choices)}")
    return {k.name: config[k.name] for k in space.knobs}


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, iteratively (a deep value must not exhaust the stack)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children)
    return deepest


def check_details(details: Any) -> dict[str, Any]:
    if not isinstance(details, dict):
        raise InvalidInputError(f"details must be a JSON object, got {type(details).__name__}")
    if _depth(details, MAX_DETAILS_DEPTH) > MAX_DETAILS_DEPTH:
        raise InvalidInputError(f"details nest deeper than {MAX_DETAILS_DEPTH} levels")
    try:
        encoded = json.dumps(details, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"details must be plain JSON without NaN or infinities ({exc})") from None
    if len(encoded) > MAX_DETAILS_BYTES:
        raise InvalidInputError(f"details take {len(encoded)} bytes, above the limit {MAX_DETAILS_BYTES}")
    return details


def check_times(workload: Workload, target: str, status: str, times: Any) -> tuple[float, ...]:
    if not isinstance(times, (list, tuple)):
        raise InvalidInputError("times must be a list of numbers")
    if len(times) > MAX_TIMES:
        raise InvalidInputError(f"at most {MAX_TIMES} times per measurement, got {len(times)}")
    if any(isinstance(t, bool) or not isinstance(t, (int, float)) for t in times):
        raise InvalidInputError("times must be numbers (not strings or booleans)")
    values = tuple(float(t) for t in times)
    if any(not math.isfinite(t) or t <= 0 for t in values):
        raise InvalidInputError("times must be finite and positive")
    floor = time_floor(workload, target)
    low = min(values, default=floor)
    if low < floor:
        raise InvalidInputError(f"time {low:.3e} s is below the physical floor {floor:.3e} s of {workload.key} "
                                f"on {target} (its FLOPs at the core group's peak)")
    high = max(values, default=0.0)
    if high > MAX_TIME_S:
        raise InvalidInputError(f"time {high:.3e} s is above the ceiling {MAX_TIME_S:.0f} s of one kernel run")
    if status == OK and not values:
        raise InvalidInputError("a successful measurement needs at least one time")
    return values


def check_measurement(workload: Workload, target: str, *, config: Any, status: Any, times: Any, error: Any = "",
                      source: Any, details: Any = None, worker: Any = "",
                      backend: str | None = None) -> CheckedMeasurement:
    """Every check of one measurement; InvalidInputError (HTTP 422) on the first that fails."""
    if not isinstance(status, str) or status not in STATUSES:
        raise InvalidInputError(f"unknown status {status!r}; expected one of {list(STATUSES)}")
    if not isinstance(source, str) or source not in SOURCES:
        raise InvalidInputError(f"unknown source {source!r}; expected one of {list(SOURCES)}")
    # the one source a worker of a registered backend may claim (a simulator worker cannot claim hardware)
    if backend and backend in BACKENDS and source != source_of(backend):
        raise InvalidInputError(f"a {backend} worker reports source {source_of(backend).value!r}, not {source!r}")
    if not isinstance(error, str) or len(error) > MAX_ERROR_CHARS:
        raise InvalidInputError(f"error must be a string of at most {MAX_ERROR_CHARS} characters")
    if not isinstance(worker, str) or len(worker) > MAX_WORKER_CHARS:
        raise InvalidInputError(f"worker must be a string of at most {MAX_WORKER_CHARS} characters")
    checked_config = check_config(workload, target, config)
    values = check_times(workload, target, status, times)
    checked_details = check_details({} if details is None else details)
    return CheckedMeasurement(config=checked_config, config_hash=config_hash(checked_config), status=status,
                              times=values, mean_time=mean(values) if status == OK else None, error=error,
                              source=source, details=checked_details, worker=worker,
                              profile_version=check_profile_version(source, checked_details))
