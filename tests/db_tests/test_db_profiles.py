"""Simulator profiles in the tuning log: versions, the active one, measurements naming their profile, and
the lookup preferring hardware. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from storage_helpers import TARGET, WORKLOAD, task_with_jobs

from db import jobs as jobs_db
from db import measurements as measurements_db
from db import profiles as profiles_db
from db import results as results_db
from db.domain import ResultIn
from db.engine import Database
from db.errors import InvalidInputError, NotFoundError
from db.orm import MeasurementRow, ProfileRow
from tuner.profile import default_profile

FITTED = default_profile(TARGET).with_values({"block_overhead_cycles": 150.0, "dma_overlap": 0.3},
                                             intervals={"block_overhead_cycles": (140.0, 160.0)},
                                             fit={"source": "test", "cv_median_abs_log_err": 0.04})


def _lease(db: Database, n: int = 10):
    with db.session() as s:
        return jobs_db.lease(s, target=TARGET, worker="w1", max_jobs=n, lease_seconds=30.0)


def _post(db: Database, token: str, *results: ResultIn):
    with db.session() as s:
        return results_db.post_results(s, lease_token=token, worker="w1", results=list(results))


def test_profiles_are_versioned_per_target_and_one_is_active(database: Database) -> None:
    with database.session() as s:
        assert profiles_db.active_profile(s, TARGET).version == 0  # nothing stored: the built-in profile
        assert profiles_db.list_profiles(s, TARGET) == []
        first = profiles_db.store_profile(s, FITTED)
        second = profiles_db.store_profile(s, FITTED.with_values({"dma_overlap": 0.6}))
        kept = profiles_db.store_profile(s, FITTED, activate=False)
    assert (first.version, second.version, kept.version) == (1, 2, 3)
    with database.session() as s:
        active = profiles_db.active_profile(s, TARGET)
        assert active.version == 2 and active.value("dma_overlap") == 0.6
        assert [p.version for p in profiles_db.list_profiles(s, TARGET)] == [1, 2, 3]
        assert profiles_db.list_profiles(s, "sw26010-pro") == []
        one = profiles_db.get_profile(s, TARGET, 1)
        assert one.fit["cv_median_abs_log_err"] == 0.04 and one.parameters == FITTED.parameters
        profiles_db.activate_profile(s, TARGET, 1)
    with database.session() as s:
        assert profiles_db.active_version(s, TARGET) == 1
        profiles_db.activate_profile(s, TARGET, 0)  # back to the built-in profile
    with database.session() as s:
        assert profiles_db.active_profile(s, TARGET) == default_profile(TARGET)
        assert s.scalar(select(func.count()).select_from(ProfileRow).where(ProfileRow.active.is_(True))) == 0


def test_a_bad_profile_or_version_changes_nothing(database: Database) -> None:
    with database.session() as s:
        profiles_db.store_profile(s, FITTED)
    bad_documents = [
        {**FITTED.to_json(), "target": "gpu"},
        {**FITTED.to_json(), "parameters": {**FITTED.to_json()["parameters"], "dma_overlap": {"value": 7.0}}},
        {**FITTED.to_json(), "parameters": {"dma_overlap": {"value": 0.5}}},
        {"target": TARGET},
        [1, 2],
    ]
    for doc in bad_documents:
        with pytest.raises(InvalidInputError, match="invalid profile"):
            profiles_db.parse_profile(doc)
    with database.session() as s, pytest.raises(NotFoundError):
        profiles_db.activate_profile(s, TARGET, 9)
    with database.session() as s:
        assert [p.version for p in profiles_db.list_profiles(s, TARGET)] == [1]
        assert profiles_db.active_version(s, TARGET) == 1


def test_simulated_results_record_their_profile_and_an_unknown_one_is_refused(database: Database) -> None:
    task_with_jobs(database, 3)
    with database.session() as s:
        profiles_db.store_profile(s, FITTED)
    got = _lease(database)
    a, b, c = (j.id for j in got.jobs)
    with pytest.raises(InvalidInputError, match="no profile version 5"):
        _post(database, got.token, ResultIn(job_id=a, status="ok", times=(1e-3,), source="simulator",
                                            details={"profile_version": 5}))
    with database.session() as s:
        assert s.scalar(select(func.count()).select_from(MeasurementRow)) == 0
    _post(database, got.token,
          ResultIn(job_id=a, status="ok", times=(1e-3,), source="simulator", details={"profile_version": 1}),
          ResultIn(job_id=b, status="ok", times=(2e-3,), source="simulator"),
          ResultIn(job_id=c, status="ok", times=(3e-3,), source="hardware"))
    with database.session() as s:
        versions = dict(s.execute(select(MeasurementRow.job_id, MeasurementRow.profile_version)).all())
    assert versions == {a: 1, b: 0, c: None}


def test_the_lookup_prefers_a_hardware_time_and_says_so(database: Database) -> None:
    task_with_jobs(database, 3)
    got = _lease(database)
    a, b, c = (j.id for j in got.jobs)
    _post(database, got.token,
          ResultIn(job_id=a, status="ok", times=(1e-4,), source="simulator"),
          ResultIn(job_id=b, status="ok", times=(3e-3,), source="hardware"),
          ResultIn(job_id=c, status="ok", times=(2e-3,), source="hardware"))
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET)
    # the simulator's 0.1 ms is faster, but a Sunway node measured this workload: its best time is served
    assert best.source == "hardware" and best.mean_time == pytest.approx(2e-3) and best.profile_version is None


def test_without_hardware_the_simulated_best_names_its_profile(database: Database) -> None:
    task_with_jobs(database, 2)
    got = _lease(database)
    a, b = (j.id for j in got.jobs)
    _post(database, got.token, ResultIn(job_id=a, status="ok", times=(1e-3,), source="simulator"),
          ResultIn(job_id=b, status="ok", times=(2e-3,), source="simulator"))
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET)
    assert best.source == "simulator" and best.profile_version == 0 and best.mean_time == pytest.approx(1e-3)


def test_without_hardware_the_active_profiles_best_is_served(database: Database) -> None:
    """A time simulated under a profile since replaced never beats the active profile's: they time the
    same configs differently, and the active one is what every simulator worker measures with now."""
    task_with_jobs(database, 4)
    with database.session() as s:
        profiles_db.store_profile(s, FITTED)  # version 1, active
    got = _lease(database)
    a, b, c, d = (j.id for j in got.jobs)
    _post(database, got.token,
          ResultIn(job_id=a, status="ok", times=(1e-4,), source="simulator", details={"profile_version": 0}),
          ResultIn(job_id=b, status="ok", times=(3e-3,), source="simulator", details={"profile_version": 1}),
          ResultIn(job_id=c, status="ok", times=(2e-3,), source="simulator", details={"profile_version": 1}))
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET)
    assert (best.profile_version, best.mean_time) == (1, pytest.approx(2e-3))
    with database.session() as s:
        profiles_db.activate_profile(s, TARGET, 0)  # back to the built-in profile: its time is served
        assert measurements_db.best_config(s, WORKLOAD.key, TARGET).mean_time == pytest.approx(1e-4)
    _post(database, got.token, ResultIn(job_id=d, status="ok", times=(5e-3,), source="hardware"))
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET)
    assert (best.source, best.mean_time) == ("hardware", pytest.approx(5e-3))
