"""Export/import of the tuning log as JSON lines: round trip, idempotent, all-or-nothing."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from storage_helpers import TARGET, task_with_jobs

from db import jobs as jobs_db
from db import records as records_db
from db import results as results_db
from db.domain import ResultIn
from db.engine import Database
from db.errors import InvalidInputError


def populate(db: Database, n: int = 12) -> None:
    task_with_jobs(db, n)
    with db.session() as s:
        got = jobs_db.lease(s, target=TARGET, worker="w1", max_jobs=n, lease_seconds=30)
    results = [ResultIn(job_id=j.id, status="ok", times=(1e-3 * (i + 1),), source="simulator",
                        details={"ldm_bytes": 100 + i}) if i % 4 else
               ResultIn(job_id=j.id, status="ldm_overflow", error="too big", source="simulator")
               for i, j in enumerate(got.jobs)]
    with db.session() as s:
        results_db.post_results(s, lease_token=got.token, worker="w1", results=results)


def export(db: Database) -> list[str]:
    with db.session() as s:
        return list(records_db.export_lines(s))


def test_round_trip_and_importing_twice_changes_nothing(database: Database, backend_factory: Callable[[], str]) -> None:
    populate(database)
    lines = export(database)
    assert len(lines) == 12 and all(line.endswith("\n") for line in lines)
    other = Database(backend_factory())
    try:
        with other.session() as s:
            stats = records_db.import_lines(s, lines)
        assert (stats.imported, stats.skipped) == (12, 0)
        assert export(other) == lines
        with other.session() as s:
            again = records_db.import_lines(s, lines)
        assert (again.imported, again.skipped) == (0, 12)
        assert export(other) == lines
    finally:
        other.dispose()


def test_import_into_the_same_log_skips_everything(database: Database) -> None:
    populate(database, 4)
    lines = export(database)
    with database.session() as s:
        stats = records_db.import_lines(s, lines)
    assert (stats.imported, stats.skipped) == (0, 4)


@pytest.mark.parametrize("corrupt", [
    lambda r: "{not json",
    lambda r: json.dumps({**r, "times": [float("nan")]}),
    lambda r: json.dumps({**r, "workload": {"op": "conv9"}}),
    lambda r: json.dumps({**r, "target": "sw9"}),
    lambda r: json.dumps({**r, "config_hash": "0" * 20}),
    lambda r: json.dumps({**r, "status": "fine"}),
])
def test_a_bad_line_imports_nothing(database: Database, backend_factory: Callable[[], str], corrupt) -> None:
    populate(database, 3)
    lines = export(database)
    bad = lines[:2] + [corrupt(json.loads(lines[2])) + "\n"]
    other = Database(backend_factory())
    try:
        with other.session() as s, pytest.raises(InvalidInputError, match="line 3"):
            records_db.import_lines(s, bad)
        assert export(other) == []
    finally:
        other.dispose()
