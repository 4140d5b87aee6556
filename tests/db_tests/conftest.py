"""Storage contract fixtures: every test here runs on SQLite, and on PostgreSQL when configured."""

from backends import backend_factory, backend_kind, backend_url, database  # noqa: F401
