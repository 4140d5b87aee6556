"""MetaSchedule's rules for ranking a tuning record, read from the record's JSON form.

Upstream (``TuningRecordNode::IsValid`` and ``SortTuningRecordByMeanRunSecs`` in TVM's
src/s_tir/meta_schedule) decides which records ``get_top_k`` may return and in which order:

- a record is valid when its trace has at least one instruction before its first postproc
  instruction, and at least one of its run times differs from exactly 1e10 (the stub MetaSchedule
  records for a failed or missing measurement; 2e10 is a real, if slow, time);
- valid records sort by the plain mean of all their run times (1e10 stubs included), stably, so a
  mean of 0.0 comes first and ties keep their commit order.

The rules read the JSON that ``TuningRecord.as_json()`` gives (``[trace, run_secs, target,
args_info]``, the trace as ``[instructions, decisions]`` with postprocs kept), so the SQL store can
keep the verdict next to each record and its migrations can backfill it, neither importing tvm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FAILED_RUN_SECS = 1e10  # upstream's kMaxMeanTime
POSTPROC_INSTRUCTION = "EnterPostproc"  # the only instruction kind upstream's IsPostproc() accepts


@dataclass(frozen=True)
class RecordRank:
    """Whether get_top_k may return a record, and its sort key (None where no key orders it: NaN)."""

    valid: bool
    mean_run_secs: float | None


def rank(record_json: Any) -> RecordRank:
    """The rank of a record given as ``TuningRecord.as_json()``."""
    trace_json, run_secs = record_json[0], record_json[1]
    instructions = trace_json[0]
    scheduled = len(instructions) > 0 and instructions[0][0] != POSTPROC_INSTRUCTION
    values = [float(v) for v in run_secs] if run_secs is not None else []
    measured = any(v != FAILED_RUN_SECS for v in values)
    return RecordRank(valid=scheduled and measured, mean_run_secs=_mean(values))


def _mean(values: list[float]) -> float | None:
    if not values:
        return FAILED_RUN_SECS  # upstream's mean of no run times
    total = 0.0
    for v in values:  # left to right, as upstream's loop; sum() compensates from Python 3.12
        total += v
    mean = total / len(values)
    # NaN compares false both ways upstream (an unspecified place in its sort); SQLite cannot even
    # store it, so both stores keep None and sort it last
    return None if math.isnan(mean) else mean
