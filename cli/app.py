"""The ``swtune`` app, built by one function: every command and sub-app is added here, explicitly.

``build_app()`` returns a new app on each call (importing a command module registers nothing), and
its root command is ``cli.errors.DomainErrorGroup``, the one handler of domain errors.
"""

from __future__ import annotations

import typer

from cli import calibrate_commands, client_commands, grad_commands, service_commands, train_commands, tuner_commands
from cli.errors import DomainErrorGroup
from cli.output import HELP_MARKUP

HELP = "Autotune deep-learning operators for Sunway processors."


def build_app() -> typer.Typer:
    app = typer.Typer(cls=DomainErrorGroup, no_args_is_help=True, help=HELP, rich_markup_mode=HELP_MARKUP)
    # the tuner, in this process
    app.command("tune")(tuner_commands.tune)
    app.command("targets")(tuner_commands.targets)
    app.command("check-op")(tuner_commands.check_op)
    app.command("grad")(grad_commands.grad)
    app.command("check-grad")(grad_commands.check_grad)
    app.command("compile")(tuner_commands.compile_model)
    app.command("tune-model")(tuner_commands.tune_model)
    app.command("train")(train_commands.train)
    app.command("calibrate")(calibrate_commands.calibrate)
    # the service: its processes, the embedded demo, the tuning log and tokens
    app.command("serve")(service_commands.serve)
    app.command("worker")(service_commands.worker)
    app.command("driver")(service_commands.driver)
    app.command("demo")(service_commands.demo)
    app.add_typer(service_commands.build_db_app(), name="db")
    app.add_typer(service_commands.build_token_app(), name="token")
    # a running server, over HTTP
    app.add_typer(client_commands.build_tasks_app(), name="tasks")
    app.command("best")(client_commands.best)
    app.command("submit")(client_commands.submit)
    return app


def main() -> None:
    """The ``swtune`` console script."""
    build_app()()
