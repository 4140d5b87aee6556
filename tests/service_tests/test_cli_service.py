"""The service's CLI commands: db upgrade, token create/list/revoke, db export/import."""

from __future__ import annotations

from pathlib import Path

from backends import fresh_url
from typer.testing import CliRunner

from cli.app import build_app
from db import tokens as tokens_db
from db.engine import Database

app = build_app()


def test_db_upgrade_and_tokens(backend_kind: str, tmp_path: Path) -> None:
    runner = CliRunner()
    with fresh_url(backend_kind, tmp_path, upgrade=False) as url:
        assert runner.invoke(app, ["db", "upgrade", "--database-url", url]).exit_code == 0
        created = runner.invoke(app, ["token", "create", "--role", "worker", "--name", "w", "--database-url", url])
        assert created.exit_code == 0, created.output
        token = created.stdout.splitlines()[0]
        db = Database(url)
        with db.session() as s:
            assert tokens_db.find_token(s, token).role == "worker"
        db.dispose()
        bad = runner.invoke(app, ["token", "create", "--role", "root", "--database-url", url])
        assert bad.exit_code == 2 and "unknown role" in bad.output
        value = "v" * 32
        args = ["token", "create", "--role", "worker", "--value", value, "--database-url", url]
        assert runner.invoke(app, args).exit_code == 0
        assert runner.invoke(app, [*args, "--if-missing"]).exit_code == 0
        listed = runner.invoke(app, ["token", "list", "--database-url", url])
        assert listed.exit_code == 0 and "worker" in listed.stdout
        assert runner.invoke(app, ["token", "revoke", "1", "--database-url", url]).exit_code == 0
        out = tmp_path / "log.jsonl"
        assert runner.invoke(app, ["db", "export", "--out", str(out), "--database-url", url]).exit_code == 0
        imported = runner.invoke(app, ["db", "import", str(out), "--database-url", url])
        assert imported.exit_code == 0 and "imported 0" in imported.stdout
