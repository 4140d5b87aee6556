"""The states of jobs, tasks and submissions keep the strings the tuning log stores and the API sends.

The ``state`` columns, the API's JSON and the dashboard hold these strings: renaming or re-valuing a member
of db.states must fail here instead of stranding stored rows (as tests/tuner_tests/test_choices.py pins the
knob choices). The round trips check that a member written to the database is stored as its plain string,
on SQLite and on PostgreSQL, through every kind of write (insert, update, a CASE expression).
"""

from __future__ import annotations

import time
from enum import StrEnum

import pytest
from sqlalchemy import text
from storage_helpers import TARGET, task_with_jobs

from db import jobs as jobs_db
from db import submissions as submissions_db
from db import tasks as tasks_db
from db.engine import Database
from db.states import FINISHED_JOBS, JobState, SubmissionState, TaskState
from db.submissions import LayerSpec
from tuner.workloads import Dense

# The stored strings of each set of states, member by member (as of issue #44).
STORED: dict[type[StrEnum], dict[str, str]] = {
    JobState: {"PENDING": "pending", "LEASED": "leased", "DONE": "done", "FAILED": "failed"},
    TaskState: {"ACTIVE": "active", "DONE": "done", "CANCELLED": "cancelled"},
}


@pytest.mark.parametrize("enum", list(STORED), ids=lambda e: e.__name__)
def test_members_are_the_stored_strings(enum: type[StrEnum]) -> None:
    assert {m.name: m.value for m in enum} == STORED[enum]
    for member in enum:
        assert member == member.value and str(member) == member.value and f"{member}" == member.value


def test_a_submission_goes_through_its_tasks_states() -> None:
    assert SubmissionState is TaskState


def test_finished_jobs_are_done_and_failed() -> None:
    assert FINISHED_JOBS == ("done", "failed")


def _raw(db: Database, sql: str) -> list[object]:
    with db.session() as s:
        return list(s.execute(text(sql)).scalars().all())


def _plain(values: list[object]) -> list[str]:
    assert all(type(v) is str for v in values), values
    return sorted(v for v in values if isinstance(v, str))


def test_job_states_are_stored_as_their_strings(database: Database) -> None:
    task_with_jobs(database, 2, max_attempts=1)
    assert _plain(_raw(database, "SELECT state FROM measure_jobs")) == ["pending", "pending"]
    with database.session() as s:
        leased = jobs_db.lease(s, target=TARGET, worker="w", max_jobs=2, lease_seconds=0.05)
    assert [j.state for j in leased.jobs] == [JobState.LEASED] * 2
    assert _plain(_raw(database, "SELECT state FROM measure_jobs")) == ["leased", "leased"]
    time.sleep(0.3)
    with database.session() as s:
        assert jobs_db.reclaim_expired(s) == (0, 2)  # the CASE expression's branch: failed
    assert _plain(_raw(database, "SELECT state FROM measure_jobs")) == ["failed", "failed"]


def test_task_states_are_stored_as_their_strings(database: Database) -> None:
    task = task_with_jobs(database, 1)
    assert _plain(_raw(database, f"SELECT state FROM tuning_tasks WHERE id = {task}")) == ["active"]
    with database.session() as s:
        info = tasks_db.cancel_task(s, task)
        assert info.state is TaskState.CANCELLED and tasks_db.lock_task(s, task) is TaskState.CANCELLED
    assert _plain(_raw(database, f"SELECT state FROM tuning_tasks WHERE id = {task}")) == ["cancelled"]
    with database.session() as s:
        assert [t.state for t in tasks_db.list_tasks(s, state=TaskState.CANCELLED)] == [TaskState.CANCELLED]


def test_submission_states_are_stored_as_their_strings(database: Database) -> None:
    with database.session() as s:
        sub = submissions_db.create_submission(s, "mlp", [LayerSpec("fc", Dense(1, 64, 128, "float32"))], TARGET, 8,
                                               "random")
    assert sub.state is SubmissionState.ACTIVE and [t.state for t in sub.tasks] == [TaskState.ACTIVE]
    assert _plain(_raw(database, "SELECT state FROM submissions")) == ["active"]
    with database.session() as s:
        assert submissions_db.finish_submission(s, sub.id, SubmissionState.CANCELLED)
        assert submissions_db.lock_submission(s, sub.id) is SubmissionState.CANCELLED
    assert _plain(_raw(database, "SELECT state FROM submissions")) == ["cancelled"]
    assert _plain(_raw(database, "SELECT state FROM tuning_tasks")) == ["done"]  # its active tasks are done
