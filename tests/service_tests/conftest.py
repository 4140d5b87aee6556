"""API contract fixtures: the app on each storage backend, with one token per role."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_helpers import Api, make_api

# pytest fixtures: imported so that pytest finds them, and named again as the fixtures' parameters
from backends import backend_factory, backend_kind, backend_url, database  # noqa: F401


@pytest.fixture
def api(backend_url: str) -> Iterator[Api]:  # noqa: F811
    with make_api(backend_url) as api:
        yield api
