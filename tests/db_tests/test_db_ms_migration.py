"""Migration 0006 on a tuning log with MetaSchedule records: workloads become "structural", stored
records get upstream's validity and mean run time, and the store ranks them by it (no tvm needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from backends import fresh_url

from db import migrate
from db.engine import Database
from db.metaschedule import SqlMetaScheduleStore

SPLIT = [["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2"]],
         ["Split", ["l1", "None", 4], [True, False], ["l3", "l4"]]]
POSTPROC = [["EnterPostproc", [], [], []]]


def record_json(instructions: list[Any], run_secs: list[float] | None) -> list[Any]:
    return [[instructions, []], run_secs, {"kind": "llvm"}, None]


# (record JSON, valid, mean run time) in commit order
STORED = [
    (record_json(SPLIT, [1.0, 3.0]), True, 2.0),
    (record_json(POSTPROC + SPLIT, [0.5]), False, 0.5),  # no instruction before its first postproc
    (record_json(SPLIT + POSTPROC, [0.0]), True, 0.0),  # a mean of 0.0: the best
    (record_json(SPLIT, [1e10]), False, 1e10),  # failed
    (record_json(SPLIT, [2e10]), True, 2e10),  # slow, not failed
    (record_json(SPLIT, [3.0, 1e10]), True, 5e9 + 1.5),  # the failed run counts in the mean
    (record_json(SPLIT, None), False, 1e10),  # never measured
    (record_json([], [0.1]), False, 0.1),  # an empty trace
]


def test_stored_records_are_ranked_by_upstreams_rules(backend_kind: str, tmp_path: Path) -> None:
    with fresh_url(backend_kind, tmp_path, upgrade=False) as url:
        migrate.upgrade(url, "0005")
        workloads = sa.table("ms_workloads", sa.column("id"), sa.column("shash"), sa.column("workload_json", sa.JSON()))
        records = sa.table("ms_records", sa.column("workload_id"), sa.column("target"),
                           sa.column("record_json", sa.JSON()), sa.column("mean_run_secs"))
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(workloads.insert().values(id=1, shash="123", workload_json=["123", "bW9k"]))
            conn.execute(records.insert(), [{"workload_id": 1, "target": "llvm", "record_json": rec,
                                             "mean_run_secs": None} for rec, _, _ in STORED])
        engine.dispose()

        migrate.upgrade(url)
        db = Database(url)
        try:
            with db.engine.connect() as conn:
                assert conn.execute(sa.text("SELECT module_equality FROM ms_workloads")).scalars().all() == [
                    "structural"]
                ranked = conn.execute(sa.text("SELECT valid, mean_run_secs FROM ms_records ORDER BY id")).all()
            assert [(bool(v), m) for v, m in ranked] == [(valid, mean) for _, valid, mean in STORED]
            store = SqlMetaScheduleStore(db)
            assert store.workload_ids("structural", "123") == [1]
            best = [rec for _, rec in store.top_records("structural", "123", None, 10)]
            assert best == [STORED[i][0] for i in (2, 0, 5, 4)]
            assert store.count("structural", "llvm") == len(STORED) and store.count("anchor-block", None) == 0
        finally:
            db.dispose()
