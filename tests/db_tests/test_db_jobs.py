"""Leasing contract: batches, heartbeats, expiry in database time, attempts, release, concurrency."""

from __future__ import annotations

import threading
import time

import pytest
from storage_helpers import TARGET, task_with_jobs

from db import jobs as jobs_db
from db import tasks as tasks_db
from db.engine import Database
from db.errors import ForbiddenError, InvalidInputError, LeaseLostError


def lease(db: Database, worker: str = "w1", n: int = 10, seconds: float = 30.0, token_id: int | None = None):
    with db.session() as s:
        return jobs_db.lease(s, target=TARGET, worker=worker, max_jobs=n, lease_seconds=seconds, token_id=token_id)


def states(db: Database, task_id: int) -> dict[str, int]:
    with db.session() as s:
        return tasks_db.job_counts(s, [task_id])[task_id]


def test_lease_hands_out_each_pending_job_once(database: Database) -> None:
    task = task_with_jobs(database, 5)
    first = lease(database, n=3)
    second = lease(database, "w2", n=3)
    third = lease(database, "w3", n=3)
    assert len(first.jobs) == 3 and len(second.jobs) == 2 and third.jobs == ()
    assert {j.id for j in first.jobs}.isdisjoint(j.id for j in second.jobs)
    assert all(j.attempts == 1 and j.state == "leased" for j in first.jobs + second.jobs)
    assert first.token != second.token
    assert states(database, task) == {"pending": 0, "leased": 5, "done": 0, "failed": 0}


def test_lease_validates_its_input(database: Database) -> None:
    with pytest.raises(InvalidInputError):
        lease(database, n=0)
    with database.session() as s, pytest.raises(InvalidInputError):
        jobs_db.lease(s, target="sw9", worker="w", max_jobs=1, lease_seconds=1)


def test_expired_leases_return_to_pending_until_attempts_run_out(database: Database) -> None:
    task = task_with_jobs(database, 1, max_attempts=2)
    assert len(lease(database, seconds=0.05).jobs) == 1
    time.sleep(0.3)
    with database.session() as s:
        assert jobs_db.reclaim_expired(s) == (1, 0)
    again = lease(database, "w2", seconds=0.05)
    assert [j.attempts for j in again.jobs] == [2]
    time.sleep(0.3)
    with database.session() as s:
        assert jobs_db.reclaim_expired(s) == (0, 1)
    assert states(database, task) == {"pending": 0, "leased": 0, "done": 0, "failed": 1}
    assert lease(database, "w3").jobs == ()


def test_lease_itself_reclaims_expired_jobs(database: Database) -> None:
    task_with_jobs(database, 2)
    lease(database, "w1", seconds=0.05)
    time.sleep(0.3)
    assert len(lease(database, "w2").jobs) == 2


def test_heartbeat_extends_the_lease(database: Database) -> None:
    task = task_with_jobs(database, 2)
    got = lease(database, seconds=0.6)
    time.sleep(0.3)
    with database.session() as s:
        assert sorted(jobs_db.heartbeat(s, lease_token=got.token, worker="w1", lease_seconds=30)) == \
            sorted(j.id for j in got.jobs)
    time.sleep(0.5)
    with database.session() as s:
        assert jobs_db.reclaim_expired(s) == (0, 0)
    assert states(database, task)["leased"] == 2


def test_heartbeat_of_a_lost_or_foreign_lease(database: Database) -> None:
    task_with_jobs(database, 1)
    got = lease(database, seconds=30)
    with database.session() as s, pytest.raises(ForbiddenError):
        jobs_db.heartbeat(s, lease_token=got.token, worker="intruder", lease_seconds=30)
    with database.session() as s, pytest.raises(LeaseLostError):
        jobs_db.heartbeat(s, lease_token="no-such-token", worker="w1", lease_seconds=30)


def test_release_hands_jobs_back_without_spending_an_attempt(database: Database) -> None:
    task = task_with_jobs(database, 3)
    got = lease(database)
    keep = got.jobs[0].id
    with database.session() as s:
        released = jobs_db.release(s, lease_token=got.token, worker="w1",
                                   job_ids=[j.id for j in got.jobs if j.id != keep])
    assert len(released) == 2
    assert states(database, task) == {"pending": 2, "leased": 1, "done": 0, "failed": 0}
    again = lease(database, "w2")
    assert sorted(j.id for j in again.jobs) == sorted(released)
    assert all(j.attempts == 1 for j in again.jobs)


def test_concurrent_workers_never_lease_the_same_job(database: Database) -> None:
    task_with_jobs(database, 60)
    seen: list[int] = []
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        db = Database(database.url)
        try:
            while True:
                got = lease(db, name, n=4)
                if not got.jobs:
                    return
                seen.extend(j.id for j in got.jobs)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            db.dispose()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(seen) == 60 and len(set(seen)) == 60
