"""The `swtune` app: built by one function (no registration on import), one domain-error handler."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import httpx
import pytest
import typer
from sqlalchemy.exc import OperationalError
from typer.main import get_command
from typer.testing import CliRunner

import cli
from cli.app import build_app
from db.errors import NotFoundError
from service.client import ServiceError
from tuner.errors import SwtuneError


def _tree(app: typer.Typer) -> dict[str, Any]:
    """{command name: its sub-tree (groups) or its option names (commands)}."""

    def walk(command: Any) -> Any:
        subs = getattr(command, "commands", None)
        if subs is not None:
            return {name: walk(sub) for name, sub in subs.items()}
        return sorted(opt for p in command.params for opt in p.opts)

    return walk(get_command(app))


def test_importing_the_cli_modules_registers_nothing() -> None:
    modules = [importlib.import_module(f"cli.{m.name}") for m in pkgutil.iter_modules(cli.__path__)
               if m.name != "__main__"]  # __main__ runs the app
    assert {m.__name__ for m in modules} >= {"cli.app", "cli.errors", "cli.tuner_commands",
                                             "cli.service_commands", "cli.client_commands"}
    for module in modules:
        apps = [name for name, value in vars(module).items() if isinstance(value, typer.Typer)]
        assert not apps, f"{module.__name__} holds a module-level app: {apps}"


def test_each_build_gives_an_independent_app_with_the_same_commands() -> None:
    first, second = build_app(), build_app()
    assert first is not second
    assert _tree(first) == _tree(second)
    assert set(_tree(first)) == {"tune", "targets", "check-op", "compile", "tune-model", "serve", "worker",
                                 "driver", "demo", "db", "token", "tasks", "best", "submit", "calibrate", "grad",
                                 "check-grad", "train"}
    first.command("extra")(lambda: None)
    assert "extra" in _tree(first) and "extra" not in _tree(second) and "extra" not in _tree(build_app())


def _app_raising(exc: BaseException) -> typer.Typer:
    """The real app plus a command (and a sub-command) that raise ``exc``."""
    app = build_app()

    def boom() -> None:
        raise exc

    app.command("boom")(boom)
    group = typer.Typer()
    group.command("boom")(boom)
    group.command("other")(lambda: None)
    app.add_typer(group, name="group")
    return app


@pytest.mark.parametrize(("exc", "line"), [
    (SwtuneError("a workload\n   spanning lines"), "error: a workload spanning lines"),
    (NotFoundError("task 7 not found"), "error: task 7 not found"),
    (ValueError("bad value"), "error: bad value"),
    (FileNotFoundError(2, "No such file or directory", "x.json"),
     "error: [Errno 2] No such file or directory: 'x.json'"),
    (ServiceError(401, "missing bearer token"), "error: HTTP 401: missing bearer token (is SWTUNE_TOKEN set to a "
                                                "valid token?)"),
    (ServiceError(404, "task 9 not found"), "error: HTTP 404: task 9 not found"),
    (httpx.ConnectError("connection refused", request=httpx.Request("GET", "http://127.0.0.1:9/api/v1/tasks")),
     "error: cannot reach http://127.0.0.1:9: connection refused"),
    (OperationalError("SELECT 1", {}, Exception("no such table: tasks\n[SQL: ...]")),
     "error: database: Exception: no such table: tasks"),
])
@pytest.mark.parametrize("where", [["boom"], ["group", "boom"]])
def test_a_domain_error_is_one_line_on_stderr_and_exit_2(exc: BaseException, line: str, where: list[str]) -> None:
    result = CliRunner().invoke(_app_raising(exc), where)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_an_unexpected_error_keeps_its_traceback() -> None:
    result = CliRunner().invoke(_app_raising(RuntimeError("a bug")), ["boom"])
    assert result.exit_code == 1
    assert isinstance(result.exception, RuntimeError) and "error: " not in result.stderr


def test_exit_codes_and_usage_errors_are_left_to_the_command_line() -> None:
    assert CliRunner().invoke(_app_raising(typer.Exit(3)), ["boom"]).exit_code == 3
    usage = CliRunner().invoke(build_app(), ["tune", "--no-such-option"])
    assert usage.exit_code == 2 and "No such option" in usage.output


def test_a_real_command_reports_a_bad_workload_in_one_line() -> None:
    result = CliRunner().invoke(build_app(), ["tune", "-w", '{"op": "dense", "m": 1}', "--trials", "1"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "missing" in lines[0], result.stderr


def test_the_worker_command_measures_for_the_embedded_service(tmp_path) -> None:
    from service.embedded import embedded_service

    with embedded_service(f"sqlite:///{tmp_path / 'log.db'}") as service, service.client() as client:
        task_id = client.submit([{"op": "dense", "m": 16, "n": 64, "k": 128}], "sw26010", 4,
                                strategy="random")["task_ids"][0]
        result = CliRunner().invoke(build_app(), ["worker", "--server", service.url, "--max-jobs", "4", "--wait", "1",
                                                  "--idle-exit", "20", "--name", "cli-worker"])
        assert result.exit_code == 0, result.output
        task = client.task(task_id)
        workers = client.request("GET", f"/api/v1/tasks/{task_id}/trials").json()["workers"]
    assert task["trials_done"] == 4  # (the driver marks the task done on its next round)
    assert [(w["worker"], w["ok"]) for w in workers] == [("cli-worker", 4)]


def test_the_worker_token_comes_from_one_place(tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("swt_x\n")
    result = CliRunner().invoke(build_app(), ["worker", "--server", "http://127.0.0.1:9", "--token-file",
                                              str(token_file)], env={"SWTUNE_TOKEN": "swt_y"})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: give the token either by SWTUNE_TOKEN/--token or by "
                                          "--token-file, not both"]


def test_the_console_is_sized_when_it_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The COLUMNS of the moment the console is made does not outlive it (a pytest-xdist worker starts with the
    80 that readline exported to it): a command's tables are as wide as its caller's COLUMNS says."""
    import cli.output
    from cli.output import sized_at_print

    monkeypatch.setenv("COLUMNS", "80")
    made = sized_at_print()
    monkeypatch.setenv("COLUMNS", "250")
    assert made.width == 250 and cli.output.console.width == 250
