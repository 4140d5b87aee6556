"""Every option and variable naming a tuning log takes a file path (relative or absolute) or a URL,
and an unusable value is refused, naming itself and the two forms, before the command does any work."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from cli.app import build_app
from db.engine import normalize_url
from db.errors import DatabaseUrlError
from service.settings import Settings

app = build_app()
BAD = ["foo://bar", "sqlite:/x.db", "postgresql+nodriver://u@h/db"]


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env={"SWTUNE_DATABASE_URL": None, **(env or {})})  # type: ignore[dict-item]


def test_a_path_becomes_an_absolute_sqlite_url_and_urls_pass(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_url("unet.db") == f"sqlite:///{tmp_path / 'unet.db'}"
    assert normalize_url("./logs/unet.db") == f"sqlite:///{tmp_path / 'logs' / 'unet.db'}"
    assert normalize_url(str(tmp_path / "a.db")) == f"sqlite:///{tmp_path / 'a.db'}"
    assert normalize_url("~/x.db") == f"sqlite:///{Path.home() / 'x.db'}"
    assert normalize_url("sqlite:///unet.db") == "sqlite:///unet.db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert Settings(database_url="unet.db").database_url == f"sqlite:///{tmp_path / 'unet.db'}"
    monkeypatch.setenv("SWTUNE_DATABASE_URL", "./env.db")
    assert Settings().database_url == f"sqlite:///{tmp_path / 'env.db'}"


@pytest.mark.parametrize("bad", [*BAD, "", "DIR"])
def test_an_unusable_value_names_itself_and_the_two_forms(bad: str, tmp_path: Path) -> None:
    bad = str(tmp_path) if bad == "DIR" else bad
    with pytest.raises(DatabaseUrlError) as err:
        normalize_url(bad)
    assert repr(bad) in str(err.value) and "file path" in str(err.value) and "SQLAlchemy URL" in str(err.value)
    with pytest.raises(ValueError, match="SQLAlchemy URL"):
        Settings(database_url=bad)


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """Each command that names a tuning log, with that option last (its value appended)."""
    records = tmp_path / "records.jsonl"
    return {
        "tune-model": ["tune-model", "resnet18", "--db"],
        "compile": ["compile", "resnet18", "-o", str(tmp_path / "out"), "--db"],
        "serve": ["serve", "--database-url"],
        "driver": ["driver", "--database-url"],
        "demo": ["demo", "--db"],
        "db upgrade": ["db", "upgrade", "--database-url"],
        "db export": ["db", "export", "--database-url"],
        "db import": ["db", "import", str(records), "--database-url"],
        "token create": ["token", "create", "--role", "read", "--database-url"],
        "token list": ["token", "list", "--database-url"],
        "token revoke": ["token", "revoke", "1", "--database-url"],
    }


@pytest.fixture
def nothing_may_start(monkeypatch) -> None:
    """Any work a command would start before checking its tuning log fails the test loudly."""

    def started(*_a: Any, **_k: Any) -> None:
        raise AssertionError("work started before the tuning log was checked")

    import uvicorn

    import service.demo
    import service.driver
    import tuner.bridge.extract

    monkeypatch.setattr(tuner.bridge.extract, "load_relax", started)
    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(service.driver, "main", started)
    monkeypatch.setattr(service.demo, "embedded_service", started)


# demo's --db has no variable: its default is a log in a temporary directory
@pytest.mark.parametrize(("command", "how"), [(c, how) for c in _commands(Path(".")) for how in ("option", "env")
                                              if (c, how) != ("demo", "env")])
def test_every_command_refuses_a_bad_tuning_log_before_any_work(command: str, how: str, tmp_path: Path,
                                                               nothing_may_start: None) -> None:
    bad = "sqlite:/unet.db"
    (tmp_path / "records.jsonl").write_text("")
    argv = _commands(tmp_path)[command]
    result = run(*argv, bad) if how == "option" else run(*argv[:-1], env={"SWTUNE_DATABASE_URL": bad})
    assert result.exit_code == 2, result.output
    assert "work started" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and repr(bad) in line, line
    assert "a file path" in line and "SQLAlchemy URL" in line, line
    assert not list(tmp_path.glob("**/*.db"))


def _forms(kind: str, url: str, tmp_path: Path) -> list[tuple[str, dict[str, str]]]:
    """(option value or "", environment) pairs that all name the database at ``url``."""
    if kind == "postgresql":  # the same database spelled as a URL with and without the driver
        plain = url.replace("postgresql+psycopg://", "postgresql://")
        return [(url, {}), (plain, {}), ("", {"SWTUNE_DATABASE_URL": plain})]
    path = Path(make_url(url).database or "")
    relative = os.path.relpath(path, tmp_path)
    return [(relative, {}), ("./" + relative, {}), (str(path), {}), (url, {}), ("", {"SWTUNE_DATABASE_URL": relative})]


def test_db_and_token_commands_take_a_path_a_relative_path_or_a_url(backend_kind: str, backend_url: str,
                                                                     tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    forms = _forms(backend_kind, backend_url, tmp_path)

    def db_run(value: str, env: dict[str, str], *argv: str) -> Any:
        result = run(*argv, *(["--database-url", value] if value else []), env=env)
        assert result.exit_code == 0, (value, env, argv, result.output)
        return result

    for i, (value, env) in enumerate(forms):
        db_run(value, env, "db", "upgrade")
        db_run(value, env, "token", "create", "--role", "read", "--name", f"form{i}")
    # every form reached one and the same database: each lists the tokens all of them created
    for value, env in forms:
        listed = db_run(value, env, "token", "list").stdout
        assert [line.split("\t")[2] for line in listed.splitlines()] == [f"form{i}" for i in range(len(forms))]
        assert db_run(value, env, "db", "export").stdout == ""
    assert not (tmp_path / "swtune.db").exists()  # no form fell back to the default log


@pytest.mark.parametrize("option", ["relative", "absolute", "url"])
def test_serve_and_driver_hand_the_converted_url_to_the_server(option: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    value = {"relative": "logs/s.db", "absolute": str(tmp_path / "logs" / "s.db"),
             "url": f"sqlite:///{tmp_path}/logs/s.db"}[option]
    seen: list[str] = []
    import uvicorn

    import service.driver

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: seen.append(Settings().database_url))
    monkeypatch.setattr(service.driver, "main", lambda: seen.append(Settings().database_url))
    monkeypatch.setenv("SWTUNE_DATABASE_URL", "")  # the commands set it for the server processes
    for argv in (["serve", "--database-url", value], ["driver", "--database-url", value]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
    assert seen == [f"sqlite:///{tmp_path}/logs/s.db"] * 2
