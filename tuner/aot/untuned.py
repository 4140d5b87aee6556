"""The schedule a compile gives a GEMM-like kernel that does not run its own tuned record.

One rule for every GEMM-like workload (a built-in conv or dense, a derived gradient, a user's
expression, a fused form with an epilogue): its tuned record when the log has one the space accepts;
otherwise the fastest (by the simulator) of the records of near workloads that the space accepts --
the same operator at another shape or with another epilogue, found among the workloads of the same
compile -- and the kind's baseline on the CPEs (the OpenACC-like schedule). So no GEMM-like operator
waits for tuning to leave the MPE. A memory-bound expression operator with no other CPE form
(it would run on the MPE) takes the analysis' choice (``analysis_choice``) where that is faster.
``Fallback`` names why a kernel runs what it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from enum import Enum
from typing import Any

from tuner.aot.lookup import Lookup, SlowerRecord, slower_record
from tuner.ir.names import operator_name
from tuner.space.space import Config
from tuner.targets import Target
from tuner.task_kind import kind_of
from tuner.workloads import Workload

log = logging.getLogger("tuner.aot")

TUNED = "tuned"  # the status of a kernel that runs its own tuned record


class Fallback(str, Enum):
    """Why a kernel does not run its own tuned record (a Kernel's status is ``fallback: <value>``)."""

    UNTUNED = "untuned"  # no record: the kind's baseline
    ANALYSIS = "untuned, the analysis' choice"  # no record: the simulator's fastest of a sample of the space
    NEAR = "near record"  # no record: a near workload's record, faster than the baseline
    INVALID = "invalid tuned config"  # the record is not valid in this space
    SLOWER = "tuned record slower than the baseline"  # the simulator times the record above the baseline
    CODEGEN = "codegen failed"  # the record cannot be generated

    def status(self, detail: str = "") -> str:
        return f"fallback: {self.value}" + (f" of {detail}" if detail else "")


def family(workload: Workload) -> tuple[str, str]:
    """What near workloads share: the op and, for an expression, its name without a layer's shape
    signature (one operator at any shape or epilogue: ``conv2d_grad_data`` of every layer)."""
    return workload.op, operator_name(str(getattr(workload, "name", "")))


class Records:
    """The tuning log as one compile reads it: each workload looked up once, and the records of the
    compile's workloads grouped by ``family`` (the near records of an untuned one)."""

    def __init__(self, lookup: Lookup | None, workloads: Iterable[Workload]) -> None:
        self._lookup = lookup
        self.slower_record = slower_record(lookup)
        self._found: dict[str, Config | None] = {}
        self._near: dict[tuple[str, str], dict[str, Config]] = {}
        for w in workloads:
            config = self(w)
            if config is not None:
                self._near.setdefault(family(w), {})[w.key] = config

    def __call__(self, workload: Workload) -> Config | None:
        if workload.key not in self._found:
            found = self._lookup(workload) if self._lookup is not None else None
            self._found[workload.key] = dict(found) if found is not None else None
        return self._found[workload.key]

    def near(self, workload: Workload) -> dict[str, Config]:
        """The records of the other workloads of ``workload``'s family, by workload key."""
        return {k: c for k, c in self._near.get(family(workload), {}).items() if k != workload.key}


def _fastest(workload: Workload, target: Target, records: Records | None, why: Fallback,
             sample: int = 0) -> tuple[Config, str]:
    """The fastest by the simulator of the near records the space accepts, the kind's baseline and
    ``sample`` seeded configs of the space (RuntimeError when the space has no baseline)."""
    from tuner.aot.timing import kernel_seconds
    from tuner.space.factory import space_for

    space = space_for(workload, target)
    kind = kind_of(workload)
    near = {k: c for k, c in (records.near(workload) if records is not None else {}).items()
            if kind.why_not_applied(space, c) is None}
    candidates = [(dict(c), Fallback.NEAR.status(k)) for k, c in near.items()] + [(kind.baseline(space), why.status())]
    candidates += [(space.decode(row), Fallback.ANALYSIS.status()) for row in space.sample(sample, 0)] if sample else []
    if len(candidates) == 1:
        return candidates[0]
    times, _ = kernel_seconds(space, [c for c, _ in candidates])
    config, status = candidates[int(times.argmin())]
    if status.startswith(Fallback.NEAR.status()):
        log.info("workload %s on %s (%s): running the %s", workload.key, target.name, why.value,
                 status.removeprefix("fallback: "))
    return config, status


def default_config(workload: Workload, target: Target, records: Records | None, why: Fallback = Fallback.UNTUNED
                   ) -> tuple[Config, str]:
    """The schedule of a workload without a usable record of its own: the fastest of the near records the
    space accepts and the kind's baseline (RuntimeError when the space has no baseline)."""
    return _fastest(workload, target, records, why)


ANALYSIS_SAMPLE = 64  # configs the analysis' choice is picked from (besides the baseline and near records)


def analysis_choice(workload: Workload, target: Target, records: Records | None) -> tuple[Config, str]:
    """The schedule of an untuned memory-bound expression operator that has no other CPE form (an
    element-wise expression reading several operands at offsets): the fastest by the simulator of
    ``default_config``'s candidates and a seeded sample of the space -- the analysis' best guess, no
    measurement."""
    return _fastest(workload, target, records, Fallback.UNTUNED, ANALYSIS_SAMPLE)


def choose_config(workload: Workload, target: Target, records: Records | None) -> tuple[Config, str]:
    """The workload's own record when the space accepts it and it is not slower than the kind's baseline,
    else ``default_config`` (with a warning)."""
    from tuner.space.factory import space_for

    config = records(workload) if records is not None else None
    if config is None:
        log.warning("untuned workload %s on %s: a near record or the OpenACC-like default schedule",
                    workload.key, target.name)
        return default_config(workload, target, records)
    space = space_for(workload, target)
    why = kind_of(workload).why_not_applied(space, dict(config))
    if why is not None:
        log.warning("tuned config of workload %s on %s is not valid here (%s): falling back to a near record or "
                    "the OpenACC-like default schedule", workload.key, target.name, why)
        return default_config(workload, target, records, Fallback.INVALID)
    return kept_unless_slower(workload, target, space, dict(config), records)


def kept_unless_slower(workload: Workload, target: Target, space: Any, config: Config, records: Records | None
                       ) -> tuple[Config, str]:
    """A valid tuned record, or, where the records say so (``SlowerRecord.BASELINE``: a tuning log's), the
    kind's baseline when the simulator times it faster (a record tuned under other costs, or with too
    small a budget): a compile of the log never runs a kernel slower than its baseline."""
    from tuner.aot.timing import kernel_seconds

    if records is None or records.slower_record != SlowerRecord.BASELINE:
        return config, TUNED
    try:
        base = kind_of(workload).baseline(space)
    except RuntimeError:
        return config, TUNED
    tuned_s, base_s = (float(t) for t in kernel_seconds(space, [config, base])[0])
    if base_s < tuned_s:
        log.warning("tuned config of workload %s on %s simulates slower than its baseline (%.3g s > %.3g s): "
                    "the baseline runs", workload.key, target.name, tuned_s, base_s)
        return base, Fallback.SLOWER.status()
    return config, TUNED
