"""Does calibration find a profile it was not told? Synthetic hardware records from a hidden profile, with
measurement noise, fitted back.

The records are what a Sunway worker would post: random valid configs of a few workloads, each timed
``repeats`` times by the simulator under the hidden profile with relative noise ``noise`` (lognormal,
tuner/measure/noise.py: one launch, so the repeats share its factor), their median kept; 40 configs per
workload by default (at the default 5.3% launch noise, 25 left the held-out error at 0.052). A share of the
records is held out of the fit. The check:

- ``all_covered``: every fitted parameter's bootstrap interval contains the hidden value;
- ``heldout_max_rel_err``: on the held-out records, the largest |fitted-profile time / hidden-profile time - 1|
  (noise-free times: how well the fitted profile predicts configs it never saw); the same against the
  noisy measured times is reported beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.calibrate.fit import Calibration, calibrate
from tuner.calibrate.records import Record, SimulatedRecords
from tuner.measure.base import Status
from tuner.measure.noise import DEFAULT_NOISE
from tuner.measure.simulator import Simulator
from tuner.profile import Profile, default_profile
from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense, Workload

# Inside every bound and away from the built-in values, so recovering it is not recovering the default.
HIDDEN_VALUES: dict[str, float] = {"p0_cycles_per_fma": 1.15, "block_overhead_cycles": 120.0,
                                   "tile_overhead_cycles": 600.0, "dma_overlap": 0.4, "dma_wait_cycles": 900.0,
                                   "spawn_join_s": 20e-6}
WORKLOADS: tuple[Workload, ...] = (Dense(512, 512, 512, "float32"), Dense(64, 1024, 256, "float64"),
                                   Conv2d(8, 64, 16, 16, 64, 3, 3), Conv2d(1, 32, 56, 56, 64, 1, 1))


@dataclass(frozen=True)
class Recovery:
    """What one recovery found: the hidden profile, the fit, whether each fitted parameter's interval
    covers its hidden value, and the held-out records' count and largest errors (module docstring)."""

    hidden: Profile
    calibration: Calibration
    covered: dict[str, bool]
    heldout: int
    heldout_max_rel_err: float
    heldout_max_rel_err_vs_measured: float

    @property
    def all_covered(self) -> bool:
        return all(self.covered.values())

    def summary(self) -> dict[str, Any]:
        fitted = self.calibration.profile
        return {
            "all_covered": self.all_covered,
            "heldout_records": self.heldout,
            "heldout_max_rel_err": round(self.heldout_max_rel_err, 4),
            "heldout_max_rel_err_vs_measured": round(self.heldout_max_rel_err_vs_measured, 4),
            "fit": self.calibration.summary(),
            "parameters": {p.name: {"hidden": self.hidden.value(p.name), "fitted": p.value,
                                    "interval": list(p.interval) if p.interval else None,
                                    "covered": self.covered.get(p.name)} for p in fitted.parameters},
        }


def synthetic_records(hidden: Profile, workloads: Sequence[Workload], per_workload: int, *, noise: float,
                      repeats: int, seed: int) -> list[Record]:
    """``per_workload`` random valid configs of each workload, timed under ``hidden`` (module docstring)."""
    rng = np.random.default_rng(seed)
    simulator = Simulator(noise=noise, repeats=repeats, seed=seed, profile=hidden)
    target = get_target(hidden.target)
    records = []
    for workload in workloads:
        space = space_for(workload, target)
        configs = [space.decode(row) for row in space.sample(20 * per_workload, rng)]
        timed = [(c, r) for c, r in zip(configs, simulator.measure(workload, target, configs), strict=True)
                 if r.status is Status.OK]
        records += [Record(workload, c, float(np.median(r.times))) for c, r in timed[:per_workload]]
    return records


def recover(*, hidden_values: Mapping[str, float] = HIDDEN_VALUES, target: str = "sw26010",
            workloads: Sequence[Workload] = WORKLOADS, per_workload: int = 40, heldout_share: float = 0.2,
            noise: float = DEFAULT_NOISE, repeats: int = 3, bootstrap: int = 60, seed: int = 0) -> Recovery:
    """Make records from a hidden profile, fit the built-in profile to most of them, check (module docstring)."""
    base = default_profile(target)
    hidden = base.with_values(hidden_values)
    records = synthetic_records(hidden, workloads, per_workload, noise=noise, repeats=repeats, seed=seed)
    order = np.random.default_rng(seed + 1).permutation(len(records))
    cut = int(round(len(records) * (1 - heldout_share)))
    fit_part = [records[i] for i in order[:cut]]
    held = [records[i] for i in order[cut:]]
    calibration = calibrate(SimulatedRecords(base, fit_part, "synthetic hardware records"), base,
                            bootstrap=bootstrap, seed=seed)
    fitted = calibration.profile
    covered = {name: _covers(fitted, hidden, name) for name in calibration.fitted}
    held_model = SimulatedRecords(base, held)
    predicted = held_model.predict(fitted.values)
    truth = held_model.predict(hidden.values)
    return Recovery(hidden, calibration, covered, len(held), float(np.max(np.abs(predicted / truth - 1))),
                    float(np.max(np.abs(predicted / held_model.measured - 1))))


def _covers(fitted: Profile, hidden: Profile, name: str) -> bool:
    interval = next(p.interval for p in fitted.parameters if p.name == name)
    return interval is not None and interval[0] <= hidden.value(name) <= interval[1]
