"""What a compile asks the tuning log: the tuned config of a workload, or None (untuned).

A lookup is any callable; a tuning log's own (``TuningLog``: the CLI's database and service lookups)
also says what a compile does with a record the simulator times slower than the kind's baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from tuner.space.space import Config
from tuner.workloads import Workload

Lookup = Callable[[Workload], "Config | None"]


class SlowerRecord(str, Enum):
    """What a compile runs for a valid record that simulates slower than the kind's baseline."""

    RUN = "run"  # the record as it is (a caller that hands over configs to build: tests, benchmarks)
    BASELINE = "baseline"  # the baseline (a tuning log: a record tuned under other costs or too small a budget)


@dataclass(frozen=True)
class TuningLog:
    """A tuning log's lookup: ``find`` answers, and ``slower_record`` says what a slower record becomes."""

    find: Lookup
    slower_record: SlowerRecord = SlowerRecord.BASELINE

    def __call__(self, workload: Workload) -> Config | None:
        return self.find(workload)


def slower_record(lookup: Lookup | None) -> SlowerRecord:
    """The policy of ``lookup``: a ``TuningLog``'s own, else records run as they are."""
    return lookup.slower_record if isinstance(lookup, TuningLog) else SlowerRecord.RUN
