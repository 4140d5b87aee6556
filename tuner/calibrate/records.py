"""Measured (workload, config, seconds) records, predicted by the simulator under a trial profile.

These are what a user's hardware gives: a CSV of measured configs (``swtune calibrate --csv``) or the
tuning log's own results that Sunway workers posted with source ``hardware``. The records are validated
where they enter (the tuning log's one measurement check); here each must be a config the simulator
times, or the fit could not use it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tuner.calibrate.fit import CalibrationError
from tuner.calibrate.model import CodeTerm
from tuner.measure.base import Status
from tuner.measure.simulator import Simulator
from tuner.profile import CHIP_PARAMETERS, SPECS, Profile
from tuner.space.space import Config
from tuner.targets import get_target
from tuner.workloads import Workload


@dataclass(frozen=True)
class Record:
    """One measured config: what ran, how, and its time in seconds (one launch)."""

    workload: Workload
    config: Config
    seconds: float


class SimulatedRecords:
    """:class:`~tuner.calibrate.model.TimeModel` of measured records: the simulator's noise-free time of
    each record's config under the trial profile."""

    # A record is one CG's kernel (the preset's target), which the chip's cross-CG costs do not touch:
    # fitting those needs records of kernels split over core groups, which the CSV cannot carry yet.
    free = tuple(s.name for s in SPECS if s.name not in CHIP_PARAMETERS)
    code_terms: tuple[CodeTerm, ...] = ()  # the simulator's own kernels: every cost is the profile's

    def __init__(self, base: Profile, records: Sequence[Record], name: str = "measured records") -> None:
        if not records:
            raise CalibrationError("no records to fit")
        self.base, self.records, self.name = base, tuple(records), name
        self.target = get_target(base.target)
        self.predict(base.values)  # every record must be a config the simulator times

    @cached_property
    def _groups(self) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(self.records):
            groups[r.workload.key].append(i)
        return groups

    @property
    def measured(self) -> np.ndarray:
        return np.array([r.seconds for r in self.records])

    def predict(self, values: Mapping[str, float]) -> np.ndarray:
        simulator = Simulator(noise=0.0, repeats=1, profile=self.base.with_values(values))
        out = np.empty(len(self.records))
        for indices in self._groups.values():
            workload = self.records[indices[0]].workload
            results = simulator.measure(workload, self.target, [self.records[i].config for i in indices])
            for i, result in zip(indices, results, strict=True):
                if result.status is not Status.OK:
                    raise CalibrationError(f"record {i + 1} ({workload.key}): the simulator cannot time its config "
                                           f"({result.status.value}: {result.error})")
                out[i] = result.times[0]
        return out

    def subset(self, indices: Sequence[int] | np.ndarray) -> SimulatedRecords:
        return SimulatedRecords(self.base, [self.records[int(i)] for i in indices], self.name)
