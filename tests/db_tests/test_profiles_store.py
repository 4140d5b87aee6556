"""The simulator profiles of the tuning log (db.profiles, migration 0005): versions per target, the active
profile, activation, refusals that change nothing, the lease carrying the active profile, and the schema
an upgraded database and a fresh one share. SQLite always, PostgreSQL when configured."""

from __future__ import annotations

import pytest
from sqlalchemy import MetaData, func, inspect, select
from storage_helpers import TARGET, WORKLOAD, task_with_jobs

from db import jobs as jobs_db
from db import migrate
from db import profiles as profiles_db
from db.engine import Database, make_engine
from db.errors import InvalidInputError, NotFoundError
from db.orm import ProfileRow, TargetRow
from tuner.profile import Profile, default_profile

PRO = "sw26010-pro"
FITTED = default_profile(TARGET).with_values(
    {"block_overhead_cycles": 180.0, "dma_overlap": 0.2}, intervals={"block_overhead_cycles": (170.0, 195.0)},
    fit={"source": "swDNN replay", "records": 172, "cv_median_abs_log_err": 0.036, "cv_max_abs_log_err": 0.159})


def _rows(db: Database) -> list[tuple[str, int, bool]]:
    with db.session() as s:
        return [tuple(r) for r in s.execute(select(TargetRow.name, ProfileRow.version, ProfileRow.active)
                                            .join(TargetRow, TargetRow.id == ProfileRow.target_id)
                                            .order_by(TargetRow.name, ProfileRow.version)).all()]


def test_versions_count_per_target_and_the_newest_stored_is_active(database: Database) -> None:
    with database.session() as s:
        assert profiles_db.active_profile(s, TARGET) == default_profile(TARGET)  # nothing stored: built-in
        one = profiles_db.store_profile(s, FITTED)
        two = profiles_db.store_profile(s, FITTED.with_values({"dma_overlap": 0.7}, version=41))  # 41 is ignored
        pro = profiles_db.store_profile(s, default_profile(PRO).with_values({"dma_wait_cycles": 500.0}))
        kept = profiles_db.store_profile(s, FITTED.with_values({"dma_overlap": 0.9}), activate=False)
    assert (one.version, two.version, pro.version, kept.version) == (1, 2, 1, 3)
    assert _rows(database) == [(TARGET, 1, False), (TARGET, 2, True), (TARGET, 3, False), (PRO, 1, True)]
    with database.session() as s:
        active = profiles_db.active_profile(s, TARGET)
        assert (active.version, active.value("dma_overlap")) == (2, 0.7)
        assert profiles_db.active_profile(s, PRO).value("dma_wait_cycles") == 500.0
        stored = profiles_db.get_profile(s, TARGET, 1)
    # the whole document survives: values, intervals, the fit's data and errors
    assert stored.parameters == FITTED.parameters and dict(stored.fit) == dict(FITTED.fit)
    assert Profile.from_json(stored.to_json()) == stored


def test_activate_switches_between_stored_versions_and_the_built_in(database: Database) -> None:
    with database.session() as s:
        for overlap in (0.1, 0.2, 0.3):
            profiles_db.store_profile(s, FITTED.with_values({"dma_overlap": overlap}))
        assert profiles_db.activate_profile(s, TARGET, 1).value("dma_overlap") == 0.1
    assert _rows(database) == [(TARGET, 1, True), (TARGET, 2, False), (TARGET, 3, False)]
    with database.session() as s:
        assert profiles_db.active_version(s, TARGET) == 1
        assert profiles_db.activate_profile(s, TARGET, 0) == default_profile(TARGET)
    assert [active for *_, active in _rows(database)] == [False, False, False]
    with database.session() as s:
        assert profiles_db.active_profile(s, TARGET) == default_profile(TARGET)
        assert [p.version for p in profiles_db.list_profiles(s, TARGET)] == [1, 2, 3]
        assert profiles_db.list_profiles(s, PRO) == []


def test_a_refused_profile_or_version_changes_nothing(database: Database) -> None:
    with database.session() as s:
        profiles_db.store_profile(s, FITTED)
    before = _rows(database)
    # its fit is no JSON a client can read back (NaN): the round trip refuses it before anything is written
    not_json = FITTED.with_values({}, fit={"cv_median_abs_log_err": float("nan")})
    with pytest.raises(InvalidInputError, match="invalid profile"), database.session() as s:
        profiles_db.store_profile(s, not_json)
    with pytest.raises(InvalidInputError, match=f"describes {TARGET}, not {PRO}"), database.session() as s:
        profiles_db.store_profile(s, FITTED, target=PRO)
    with pytest.raises(NotFoundError, match="no profile version 7"), database.session() as s:
        profiles_db.activate_profile(s, TARGET, 7)
    with pytest.raises(NotFoundError), database.session() as s:
        profiles_db.activate_profile(s, PRO, 1)  # a version of another target is not this target's
    assert _rows(database) == before == [(TARGET, 1, True)]


@pytest.mark.parametrize("document", [
    {"target": "gpu", "parameters": {}},
    {**FITTED.to_json(), "target": "sw9"},
    {**FITTED.to_json(), "parameters": {**FITTED.to_json()["parameters"], "dma_overlap": {"value": 2.0}}},
    {**FITTED.to_json(), "parameters": {**FITTED.to_json()["parameters"], "dma_overlap": {"value": 10**400}}},
    {**FITTED.to_json(), "parameters": {**FITTED.to_json()["parameters"], "surprise": {"value": 1.0}}},
    {**FITTED.to_json(), "fit": [1]},
    {**FITTED.to_json(), "version": "2"},
    "a profile",
])
def test_every_bad_document_is_an_invalid_input(document: object) -> None:
    with pytest.raises(InvalidInputError, match="invalid profile"):
        profiles_db.parse_profile(document)


def test_a_simulator_lease_carries_the_active_profile_and_others_do_not(database: Database) -> None:
    task_with_jobs(database, 6)
    with database.session() as s:
        nothing = jobs_db.lease(s, target=PRO, worker="w0", max_jobs=2, lease_seconds=30.0, backend="simulator")
        builtin = jobs_db.lease(s, target=TARGET, worker="w1", max_jobs=2, lease_seconds=30.0, backend="simulator")
        profiles_db.store_profile(s, FITTED)
    with database.session() as s:
        fitted = jobs_db.lease(s, target=TARGET, worker="w2", max_jobs=2, lease_seconds=30.0)
        sunway = jobs_db.lease(s, target=TARGET, worker="w3", max_jobs=2, lease_seconds=30.0, backend="sunway")
    assert nothing.jobs == () and nothing.profile is None
    assert builtin.profile == default_profile(TARGET)
    assert fitted.profile is not None and fitted.profile.version == 1
    assert fitted.profile.parameters == FITTED.parameters
    assert len(sunway.jobs) == 2 and sunway.profile is None  # a hardware worker has no use for it


def test_migration_0005_adds_the_table_and_backfills_simulated_rows(backend_url: str) -> None:
    migrate.downgrade(backend_url, "0004")
    engine = make_engine(backend_url)
    try:
        assert "profiles" not in inspect(engine).get_table_names()
        tables = MetaData()
        tables.reflect(engine, only=["targets", "workloads", "measurements"])
        with engine.begin() as conn:
            tid = conn.execute(tables.tables["targets"].insert().values(name=TARGET, description="")
                               .returning(tables.tables["targets"].c.id)).scalar_one()
            wid = conn.execute(tables.tables["workloads"].insert().values(
                key=WORKLOAD.key, op=WORKLOAD.op, canonical_json=WORKLOAD.canonical_json(), flops=WORKLOAD.flops)
                .returning(tables.tables["workloads"].c.id)).scalar_one()
            conn.execute(tables.tables["measurements"].insert(), [
                dict(workload_id=wid, target_id=tid, config_hash=f"h{source}", config={}, times=[1e-3],
                     mean_time=1e-3, status="ok", error="", worker="w", source=source, details={})
                for source in ("simulator", "hardware", "emulator")])
        migrate.upgrade(backend_url)
        assert migrate.current_revision(engine) == migrate.head_revision()
        assert migrate.schema_diff(engine) == []  # an upgraded database is the schema a fresh one gets
        columns = {c["name"]: c for c in inspect(engine).get_columns("measurements")}
        assert columns["profile_version"]["nullable"]
        indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("measurements")}
        assert indexes["ix_measurements_best_source"] == ["workload_id", "target_id", "source", "status",
                                                          "mean_time"]
        uniques = [u["column_names"] for u in inspect(engine).get_unique_constraints("profiles")]
        assert ["target_id", "version"] in uniques
        measurements = MetaData()
        measurements.reflect(engine, only=["measurements"])
        m = measurements.tables["measurements"]
        with engine.connect() as conn:
            backfilled = dict(conn.execute(select(m.c.source, m.c.profile_version)).all())
        # every simulated time before profiles came from the built-in profile; no profile timed the others
        assert backfilled == {"simulator": 0, "hardware": None, "emulator": None}
    finally:
        engine.dispose()


def test_one_active_profile_per_target_after_many_stores(database: Database) -> None:
    with database.session() as s:
        for i in range(5):
            profiles_db.store_profile(s, FITTED.with_values({"dma_overlap": i / 10}), activate=i % 2 == 0)
    with database.session() as s:
        active = s.scalar(select(func.count()).select_from(ProfileRow).where(ProfileRow.active.is_(True)))
        assert active == 1 and profiles_db.active_version(s, TARGET) == 5
