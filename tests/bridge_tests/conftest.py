"""MetaSchedule store fixtures: in memory, and the SQL store on every storage backend."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import backend_names, fresh_url

from tuner.bridge.ms_database import MemoryStore


@pytest.fixture(params=["memory", *backend_names()])
def ms_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "memory":
        yield MemoryStore()
        return
    from db.engine import Database
    from db.metaschedule import SqlMetaScheduleStore

    with fresh_url(request.param, tmp_path) as url:
        database = Database(url)
        yield SqlMetaScheduleStore(database)
        database.dispose()
