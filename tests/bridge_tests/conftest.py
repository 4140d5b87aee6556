"""MetaSchedule store fixtures: in memory, and the SQL store on every storage backend."""

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from backends import backend_names, fresh_url

from tuner.bridge.ms_database import MemoryStore, MetaScheduleStore


@pytest.fixture(params=["memory", *backend_names()])
def ms_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], MetaScheduleStore]]:
    """Fresh, separate stores of one backend (e.g. the two databases of a union)."""
    if request.param == "memory":
        yield MemoryStore
        return
    from db.engine import Database
    from db.metaschedule import SqlMetaScheduleStore

    with contextlib.ExitStack() as stack:
        def make() -> MetaScheduleStore:
            database = Database(stack.enter_context(fresh_url(request.param, tmp_path)))
            stack.callback(database.dispose)  # before its database is dropped (the stack unwinds backwards)
            return SqlMetaScheduleStore(database)

        yield make


@pytest.fixture
def ms_store(ms_store_factory: Callable[[], MetaScheduleStore]) -> MetaScheduleStore:
    return ms_store_factory()
