"""A simulator profile: the core-group costs that published data does not pin down, as named, bounded
parameters with a meaning and a source (or the word "assumption"), and the fit that set them.

A profile is applied to a :class:`~tuner.targets.Target` (``Profile.apply``): each parameter replaces the
Target field of the same name, so the analysis and the simulator read every cost from one place, the
Target, whichever profile produced it. The built-in profile (``default_profile``, version 0) holds the
Target presets' own values, so measuring with it is measuring as before profiles existed. Fitted profiles
(``swtune calibrate``) are stored in the tuning log with versions 1, 2, ...; each simulator measurement
records the version it came from.

Where each parameter acts: ``p0_cycles_per_fma`` and ``block_overhead_cycles`` in the inner-loop model
(tuner/space/compute.py), ``dma_overlap``, ``dma_wait_cycles`` and ``tile_overhead_cycles`` in the
kernel's step and tile accounting (tuner/measure/simulator.py), ``spawn_join_s`` once per kernel
everywhere. The memory-bound CPE kernels' own analysis (tuner/space/cpe/schedule.py) reads only
``spawn_join_s`` of these. The chip's parameters (``CHIP_PARAMETERS``: a kernel split over core groups,
tuner/space/chip.py) act only on targets with more than one CG; a profile document written before they
existed takes the preset's values for them.

A profile belongs to a preset (``sw26010``) and applies to each of its core-group counts (``sw26010-4cg``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tuner.errors import SwtuneError
from tuner.targets import Target, get_target

ASSUMPTION = "assumption"
DEFAULT_VERSION = 0


class ProfileError(SwtuneError, ValueError):
    """A profile that does not describe its target: an unknown or missing parameter, a value outside its
    bounds, a non-finite number, a malformed document."""


@dataclass(frozen=True)
class ParameterSpec:
    """What one uncertain cost is, where it may lie, and what says so."""

    name: str  # the Target field it sets
    low: float
    high: float
    unit: str
    meaning: str
    source: str  # a citation of the figure that sets the prior, or ASSUMPTION


# The uncertain costs of a core group (../shared sunway sources, summarised in docs/calibration.md).
# Bounds are physical: wide enough for every published fit, narrow enough to exclude nonsense.
SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec("p0_cycles_per_fma", 0.8, 2.0, "cycles per vector FMA",
                  "steady-state issue of the inner loop's vector FMAs on P0 (1 = one per cycle)",
                  "swDNN perf.1 fit: 13-16 cycles per 16 vmad; swGEMM README: 16 cycles per 16 vmad"),
    ParameterSpec("block_overhead_cycles", 0.0, 400.0, "cycles per register block",
                  "start-up and drain of one register block's reduction loop (accumulator load/store, "
                  "pipeline fill, register-communication start-up) in the generated kernels",
                  "assumption (FACTS §4's 88.7-95% DGEMMs bound it for good code; swDNN's own tiles pay "
                  "about 160, a term of its replay, tuner/calibrate/swdnn.py)"),
    ParameterSpec("tile_overhead_cycles", 0.0, 2000.0, "cycles per output tile",
                  "loop setup and reply-word bookkeeping per output tile", ASSUMPTION),
    ParameterSpec("dma_overlap", 0.0, 1.0, "fraction",
                  "fraction of a double-buffered transfer that runs under compute (1 = fully hidden)",
                  "FACTS §4: DGEMM at 88.7-95% of peak needs its transfers hidden; swGEMM's own model "
                  "assumes 1.0 (swDNN's code adds its DMA to compute: a term of its replay)"),
    ParameterSpec("dma_wait_cycles", 0.0, 3000.0, "cycles per wait",
                  "fixed cost of one DMA wait (reply-word poll) beyond the request's transfer",
                  "swCandle synchronous copy: about 2 us per round trip with 64 CPEs"),
    ParameterSpec("spawn_join_s", 5e-6, 100e-6, "seconds",
                  "athread_spawn + athread_join of one kernel", "swCandle BCAST minimum kernel time"),
    # No source gives a cross-CG cost (../shared/sunway/whole-chip-sources.md): the bounds are ours. None
    # reaches zero cost: SWBWA's 6-CG runs without cross placement (2.5x, not 5.7x) show it is not free.
    ParameterSpec("cross_bw_fraction", 0.25, 0.9, "fraction",
                  "a CG's DMA rate when its CPEs read another CG's memory, over the rate from its own", ASSUMPTION),
    ParameterSpec("cross_request_cycles", 50.0, 2000.0, "CPE cycles per request",
                  "what crossing the on-chip network adds to one DMA request to another CG's memory", ASSUMPTION),
    ParameterSpec("cg_launch_s", 2e-6, 100e-6, "seconds",
                  "starting and joining the other CGs of a kernel split over several, beyond one CG's "
                  "spawn and join (SW26010: a host thread per CG; SW26010-Pro: athread_spawn_cgs)", ASSUMPTION),
    ParameterSpec("cg_sync_s", 0.5e-6, 30e-6, "seconds",
                  "a barrier across the CGs between two phases of one spawn: no hardware barrier crosses CGs "
                  "(only athread_syn within one), so flags through memory", ASSUMPTION),
)
SPEC_BY_NAME: dict[str, ParameterSpec] = {s.name: s for s in SPECS}
CHIP_PARAMETERS = ("cross_bw_fraction", "cross_request_cycles", "cg_launch_s", "cg_sync_s")  # act only with several CGs


@dataclass(frozen=True)
class Parameter:
    """One parameter's value in a profile, with the interval a fit gives it (None when not fitted)."""

    name: str
    value: float
    interval: tuple[float, float] | None = None

    @property
    def spec(self) -> ParameterSpec:
        return SPEC_BY_NAME[self.name]


@dataclass(frozen=True)
class Profile:
    """The uncertain costs of one target, versioned; ``fit`` describes the data and errors of the fit."""

    target: str
    parameters: tuple[Parameter, ...]
    version: int = DEFAULT_VERSION
    fit: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.parameters]
        if sorted(names) != sorted(SPEC_BY_NAME):
            missing, unknown = set(SPEC_BY_NAME) - set(names), set(names) - set(SPEC_BY_NAME)
            raise ProfileError(f"profile of {self.target!r} must set exactly the parameters {sorted(SPEC_BY_NAME)}"
                               f" (missing {sorted(missing)}, unknown {sorted(unknown)}, or repeated)")
        for p in self.parameters:
            _check_value(p.name, p.value)
            if p.interval is not None:
                lo, hi = p.interval
                _check_value(p.name, lo)
                _check_value(p.name, hi)
                if not lo <= p.value <= hi:
                    raise ProfileError(f"{p.name}: interval [{lo}, {hi}] does not contain the value {p.value}")
        if self.version < 0:
            raise ProfileError(f"profile version must be >= 0, got {self.version}")
        get_target(self.target)  # an unknown target raises UnknownTargetError

    def value(self, name: str) -> float:
        for p in self.parameters:
            if p.name == name:
                return p.value
        raise KeyError(name)

    @property
    def values(self) -> dict[str, float]:
        return {p.name: p.value for p in self.parameters}

    def apply(self, target: Target | str) -> Target:
        """The target with this profile's costs; the target must be the profile's own."""
        base = get_target(target)
        if base.base_name != self.target:
            raise ProfileError(f"a profile of {self.target!r} cannot be applied to {base.name!r}")
        values: dict[str, Any] = self.values  # every name is a float field of Target (checked at import)
        return replace(base, **values)

    def with_values(self, values: Mapping[str, float], *, intervals: Mapping[str, tuple[float, float]] | None = None,
                    version: int | None = None, fit: Mapping[str, Any] | None = None) -> Profile:
        """A copy with some values (and their intervals) replaced."""
        intervals = intervals or {}
        params = tuple(Parameter(p.name, float(values.get(p.name, p.value)),
                                 intervals.get(p.name, p.interval if p.name not in values else None))
                       for p in self.parameters)
        return Profile(self.target, params, self.version if version is None else version,
                       dict(self.fit if fit is None else fit))

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "version": self.version, "fit": dict(self.fit),
                "parameters": {p.name: {"value": p.value,
                                        "interval": list(p.interval) if p.interval is not None else None}
                               for p in self.parameters}}

    @classmethod
    def from_json(cls, doc: Any) -> Profile:
        """The one parse of a profile document (wire, database, file); raises ProfileError."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("parameters"), Mapping):
            raise ProfileError("a profile is an object with 'target', 'version' and 'parameters'")
        target, version, fit = doc.get("target"), doc.get("version", DEFAULT_VERSION), doc.get("fit", {})
        if not isinstance(target, str) or not isinstance(version, int) or isinstance(version, bool):
            raise ProfileError("a profile's 'target' is a string and its 'version' an integer")
        if not isinstance(fit, Mapping):
            raise ProfileError("a profile's 'fit' is an object")
        params = []
        for name, entry in doc["parameters"].items():
            if not isinstance(entry, Mapping) or not _is_number(entry.get("value")):
                raise ProfileError(f"parameter {name!r} needs a numeric 'value'")
            interval = entry.get("interval")
            if interval is not None:
                if (not isinstance(interval, list | tuple) or len(interval) != 2
                        or not all(_is_number(x) for x in interval)):
                    raise ProfileError(f"parameter {name!r}: 'interval' is two numbers or null")
                interval = (float(interval[0]), float(interval[1]))
            params.append(Parameter(str(name), float(entry["value"]), interval))
        preset = get_target(target)
        given = {p.name for p in params}
        # a document from before the chip's parameters: the preset's values (they act only with several CGs)
        params += [Parameter(name, float(getattr(preset, name))) for name in CHIP_PARAMETERS if name not in given]
        return cls(preset.base_name, tuple(params), version, dict(fit))


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check_value(name: str, value: float) -> None:
    spec = SPEC_BY_NAME[name]
    if not math.isfinite(value) or not spec.low <= value <= spec.high:
        raise ProfileError(f"{name} = {value} is outside its bounds [{spec.low}, {spec.high}] ({spec.unit})")


def default_profile(target: Target | str) -> Profile:
    """Version 0: the Target preset's own values, so it reproduces the simulator as it was."""
    tgt = get_target(target)
    return Profile(tgt.base_name, tuple(Parameter(s.name, float(getattr(tgt, s.name))) for s in SPECS))


# Every parameter names a Target field: checked once at import so a renamed field fails loudly here.
_UNKNOWN_FIELDS = set(SPEC_BY_NAME) - {f.name for f in fields(Target)}
if _UNKNOWN_FIELDS:
    raise ImportError(f"profile parameters without a Target field: {sorted(_UNKNOWN_FIELDS)}")
