"""The documentation's commands run as written: every ``swtune ...`` line of the code blocks of the README
and of docs/*.md (also inside a ``&&`` chain) is run, in order, as the console script runs it, in a
scratch directory, with ``SWTUNE_SERVER`` pointing at a live embedded service (driver and simulator
workers) for the client commands; the others run on their own embedded default, as a reader's do.
Commands that tune to the end (demo, tune, tune-model) get at most 4 ``--trials``, train 1; the
submitted task is cancelled by the docs themselves. So the README and the docs cannot drift from the CLI."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the README first, then docs/ by name
TUNING_COMMANDS = {"demo", "tune", "tune-model", "train"}  # train tunes by default (--trials 8)
SMALL_TRIALS = 4
# a training step is a hundred tasks (forward and backward): one trial each, the baseline, still tunes
# every one of them through the embedded service, in a third of the time of four
SMALL_TRIALS_OF = {"train": 1}


def readme_commands(text: str) -> list[list[str]]:
    """The argv (without the program) of every swtune command in the README's code blocks, in order."""
    commands: list[list[str]] = []
    for language, block in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if language not in ("", "bash", "sh", "console"):
            continue  # a Python example, a TOML excerpt
        for line in block.splitlines():
            for part in line.split("&&"):
                if not part.split() or Path(part.split()[0]).name != "swtune":
                    continue  # not a command (a diagram, a program's output)
                words = shlex.split(part, comments=True)
                # a bare "swtune" names the package (docs/architecture.md's layer stack), not a command
                if len(words) > 1 and Path(words[0]).name == "swtune":
                    commands.append(words[1:])
    return commands


def doc_commands() -> list[list[str]]:
    """The swtune commands of the README and of docs/, page by page, in order."""
    return [argv for page in PAGES for argv in readme_commands(page.read_text())]


def small(argv: list[str]) -> list[str]:
    """``argv`` with at most SMALL_TRIALS trials when the command tunes until it is done."""
    if argv[0] not in TUNING_COMMANDS:
        return argv
    cap = SMALL_TRIALS_OF.get(argv[0], SMALL_TRIALS)
    if "--trials" not in argv:
        return [*argv, "--trials", str(cap)]
    i = argv.index("--trials") + 1
    return [*argv[:i], str(min(int(argv[i]), cap)), *argv[i + 1:]]


def test_the_readme_commands_are_found() -> None:
    commands = doc_commands()
    heads = [" ".join(c[:2]) if c[0] in ("tasks", "db", "token") else c[0] for c in commands]
    assert {"demo", "tune-model", "compile", "submit", "tasks list", "tasks show", "tasks cancel", "best"} <= set(heads)
    assert small(["tune-model", "m", "--trials", "16"]) == ["tune-model", "m", "--trials", "4"]
    assert small(["demo"]) == ["demo", "--trials", "4"] and small(["compile", "m"]) == ["compile", "m"]
    assert small(["train", "cnn", "--trials", "8"]) == ["train", "cnn", "--trials", "1"]
    # the console script is cli.app:main, which is what the test runs
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"swtune": "cli.app:main"}


def _wait_for_a_measurement(server: str, task_id: int, timeout: float = 120.0) -> None:
    """What a README reader does before `swtune best`: wait until the task has a first result."""
    from service.client import ServiceClient

    deadline = time.monotonic() + timeout
    with ServiceClient(server, None) as client:
        while client.task(task_id)["best_time"] is None:
            assert time.monotonic() < deadline, "no measurement within the timeout"
            time.sleep(0.5)


# The commands run in independent groups, so that the test runner can spread them over its workers:
# commands that share files stay together, in the README's order (tune-model writes the log that
# compile reads; the client commands act on the task submit creates); the client group has its own service.
GROUP_OF = {"tune-model": "model", "compile": "model", "demo": "demo", "train": "train", "calibrate": "calibrate"}
CLIENT = "client"  # submit, tasks, best: the service's client commands


def command_groups(commands: list[list[str]]) -> dict[str, list[list[str]]]:
    groups: dict[str, list[list[str]]] = {}
    for argv in commands:
        groups.setdefault(GROUP_OF.get(argv[0], CLIENT), []).append(argv)
    return groups


def test_every_readme_command_is_in_a_group_in_order() -> None:
    commands = doc_commands()
    groups = command_groups(commands)
    assert set(groups) == {"model", "demo", "train", "calibrate", CLIENT}
    assert sorted(sum(groups.values(), [])) == sorted(commands)
    assert [argv[0] for argv in groups["model"]] == ["tune-model", "compile"]


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(command_groups(doc_commands())))
def test_every_readme_command_runs_as_written(tmp_path: Path, group: str) -> None:
    """Only the client commands talk to a service (``--server``, default ``$SWTUNE_SERVER``): their group
    gets a live one; the others run as a reader runs them, on their own embedded default."""
    from service.embedded import embedded_service

    commands = command_groups(doc_commands())[group]
    with contextlib.ExitStack() as stack:
        env = {**os.environ, "COLUMNS": "160",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("SWTUNE_DATABASE_URL", None)
        env.pop("SWTUNE_SERVER", None)
        server = None
        if group == CLIENT:
            server = stack.enter_context(embedded_service(f"sqlite:///{tmp_path / 'server.db'}", workers=2)).url
            env["SWTUNE_SERVER"] = server
        work = tmp_path / "work"
        work.mkdir()
        for argv in commands:
            if argv[0] == "best":
                assert server is not None
                _wait_for_a_measurement(server, 1)
            run = small(argv)
            result = subprocess.run([sys.executable, "-c", "import sys; from cli.app import main; "
                                     "sys.argv[0] = 'swtune'; main()", *run], cwd=work, env=env,
                                    capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, f"swtune {shlex.join(run)}\n{result.stdout}\n{result.stderr}"
    if group == "model":  # what the README says the model commands leave behind
        assert (work / "resnet18.db").exists() and (work / "resnet18_sw" / "Makefile").exists()
