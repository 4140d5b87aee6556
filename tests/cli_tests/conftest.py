"""CLI test fixtures: the storage backends (SQLite always, PostgreSQL when SWTUNE_TEST_POSTGRES_URL is set)."""

from backends import backend_factory, backend_kind, backend_url, database  # noqa: F401
