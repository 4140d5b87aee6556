"""The ``swtune`` app, built by one function: every command and sub-app is added here, explicitly.

``build_app()`` returns a new app on each call (importing a command module registers nothing), and
its root command is ``cli.errors.DomainErrorGroup``, the one handler of domain errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from cli import calibrate_commands, client_commands, grad_commands, service_commands, train_commands, tuner_commands
from cli.errors import DomainErrorGroup
from cli.output import HELP_MARKUP

HELP = "Autotune deep-learning operators for Sunway processors."


def build_app() -> typer.Typer:
    app = typer.Typer(cls=DomainErrorGroup, no_args_is_help=True, help=HELP, rich_markup_mode=HELP_MARKUP)
    commands: list[tuple[str, Callable[..., Any] | typer.Typer]] = [
        # the tuner, in this process
        ("tune", tuner_commands.tune),
        ("targets", tuner_commands.targets),
        ("check-op", tuner_commands.check_op),
        ("grad", grad_commands.grad),
        ("check-grad", grad_commands.check_grad),
        ("compile", tuner_commands.compile_model),
        ("tune-model", tuner_commands.tune_model),
        ("train", train_commands.train),
        ("calibrate", calibrate_commands.calibrate),
        # the service: its processes, the embedded demo, the tuning log and tokens
        ("serve", service_commands.serve),
        ("worker", service_commands.worker),
        ("driver", service_commands.driver),
        ("demo", service_commands.demo),
        ("db", service_commands.build_db_app()),
        ("token", service_commands.build_token_app()),
        # a running server, over HTTP
        ("tasks", client_commands.build_tasks_app()),
        ("best", client_commands.best),
        ("submit", client_commands.submit),
    ]
    for name, command in commands:
        if isinstance(command, typer.Typer):
            app.add_typer(command, name=name)
        else:
            app.command(name)(command)
    return app


def main() -> None:
    """The ``swtune`` console script."""
    build_app()()
