"""End-to-end fixtures: the storage backends (a server process is started per test)."""

from backends import backend_kind, backend_url  # noqa: F401
