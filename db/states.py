"""The states a measure job, a tuning task and a model submission go through, each set defined once.

Each set is a ``StrEnum``: a member equals the string it stands for, so the ``state`` columns, JSON and
the wire keep the strings they always held (no migration); tests/db_tests/test_states.py pins them.
A simulator profile has no such state: at most one version per target is ``active`` (a boolean column).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """A measure job: queued, leased by a worker, measured (ok or a failed config), or given up."""

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"  # measured: its trial is used, whatever the measurement's status
    FAILED = "failed"  # its lease expired max_attempts times: given up, its trial used too


FINISHED_JOBS = (JobState.DONE, JobState.FAILED)  # the jobs that used a trial for good


class TaskState(StrEnum):
    """A tuning task, and a model submission (whose tasks go through the same states): tuning,
    stopped (its budget spent or converged; "done" is not "tuned"), or cancelled."""

    ACTIVE = "active"
    DONE = "done"
    CANCELLED = "cancelled"


SubmissionState = TaskState
