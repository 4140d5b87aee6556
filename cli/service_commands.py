"""The service's commands: ``serve``, ``worker``, ``driver``, ``demo``, ``db upgrade|export|import``
and ``token create|list|revoke``.

Heavy imports stay inside the commands, so ``swtune worker`` loads no server-side stack. Secrets
never travel in argv (visible in ``ps``): the worker reads its token from SWTUNE_TOKEN or a file
(``--token-file``). Errors are raised, not printed: ``cli.errors`` turns them into one line.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.output import sub_app
from cli.tuning_log import DB_HELP, log_session
from cli.tuning_log import database_url as _url
from tuner.measure.noise import DEFAULT_NOISE

DbUrl = Annotated[str | None, typer.Option("--database-url", envvar="SWTUNE_DATABASE_URL", help=DB_HELP)]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(token: str | None, token_file: Path | None) -> str | None:
    """The worker token: SWTUNE_TOKEN / --token, or the first line of --token-file."""
    if token_file is not None:
        if token:
            raise ValueError("give the token either by SWTUNE_TOKEN/--token or by --token-file, not both")
        value = token_file.read_text().strip().splitlines()
        if not value or not value[0].strip():
            raise ValueError(f"token file {token_file} is empty")
        return value[0].strip()
    return token




# --- processes ---------------------------------------------------------------------------------
def serve(host: Annotated[str, typer.Option(envvar="SWTUNE_HOST", help="bind address")] = "127.0.0.1",
          port: Annotated[int, typer.Option(envvar="SWTUNE_PORT", help="port")] = 8000,
          database_url: DbUrl = None,
          auth: Annotated[bool, typer.Option("--auth/--no-auth", envvar="SWTUNE_AUTH_ENABLED",
                                             help="bearer-token auth (on by default)")] = True,
          driver: Annotated[bool, typer.Option("--driver/--no-driver", envvar="SWTUNE_DRIVER_ENABLED",
                                               help="run the tuning driver in this process")] = True,
          workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
          log_level: Annotated[str, typer.Option()] = "info") -> None:
    """Run the API server (uvicorn) with its tuning driver."""
    import uvicorn

    if not auth and not is_loopback(host):
        typer.echo(f"warning: --no-auth on {host}: anyone who can reach this address acts as admin "
                   "(submit, import, cancel); use --auth or bind 127.0.0.1", err=True)
    # The app factory reads SWTUNE_* settings; passing them by environment also reaches
    # uvicorn's worker processes.
    os.environ["SWTUNE_DATABASE_URL"] = _url(database_url)
    os.environ["SWTUNE_AUTH_ENABLED"] = "true" if auth else "false"
    os.environ["SWTUNE_DRIVER_ENABLED"] = "true" if driver else "false"
    if workers > 1 and driver:
        typer.echo("note: each uvicorn worker runs a driver; they coordinate through the database")
    uvicorn.run("service.app:create_app", factory=True, host=host, port=port, workers=workers, log_level=log_level)


def worker(server: Annotated[str, typer.Option(help="service URL, e.g. http://127.0.0.1:8000")],
           target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
           backend: Annotated[str, typer.Option(
               help="simulator, emulator (athread C on the x86 emulator) or sunway")] = "simulator",
           token: Annotated[str | None, typer.Option(
               envvar="SWTUNE_TOKEN", help="worker bearer token; prefer the SWTUNE_TOKEN variable or "
                                           "--token-file: an argument shows in `ps`")] = None,
           token_file: Annotated[Path | None, typer.Option(
               envvar="SWTUNE_TOKEN_FILE", help="file whose first line is the worker token")] = None,
           batch: Annotated[int | None, typer.Option(
               "--jobs-per-lease", help="jobs asked for per lease (default: the backend's chunk, 16 on the "
                                        "simulator, 1 otherwise)")] = None,
           name: Annotated[str | None, typer.Option(help="worker name (default host-pid-random)")] = None,
           wait: Annotated[float, typer.Option(help="long-poll seconds per lease request")] = 10.0,
           max_jobs: Annotated[int | None, typer.Option(help="exit after posting this many results")] = None,
           idle_exit: Annotated[float | None, typer.Option(help="exit after this many idle seconds")] = None,
           noise: Annotated[float, typer.Option(help="simulator: relative measurement noise")] = DEFAULT_NOISE,
           seed: Annotated[int, typer.Option(help="simulator: noise seed")] = 0,
           latency: Annotated[float, typer.Option(hidden=True, help="tests: seconds added per measure call")] = 0.0,
           compile_cmd: Annotated[str, typer.Option(help="sunway: compile command template")] = "",
           run_cmd: Annotated[str, typer.Option(help="sunway: run command template")] = "",
           queue: Annotated[str, typer.Option(help="sunway: bsub queue")] = "q_sw_expr",
           time_pattern: Annotated[str, typer.Option(help="sunway: regex capturing kernel seconds")] = "",
           log_level: Annotated[str, typer.Option()] = "INFO") -> None:
    """Lease measurement jobs from a server, measure them, post the results (SIGTERM: hand back, exit)."""
    import logging

    from service.worker import run_worker

    token = read_token(token, token_file)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise typer.Exit(run_worker(server, target, backend, token=token, batch=batch, name=name, wait_seconds=wait,
                                max_jobs=max_jobs, idle_exit=idle_exit, noise=noise, seed=seed, latency=latency,
                                compile_cmd=compile_cmd,
                                run_cmd=run_cmd, queue=queue, time_pattern=time_pattern))


def driver(database_url: DbUrl = None) -> None:
    """Run the tuning driver on its own (next to API replicas started with --no-driver)."""
    os.environ["SWTUNE_DATABASE_URL"] = _url(database_url)
    from service.driver import main

    main()


def demo(trials: Annotated[int, typer.Option(help="trials per layer")] = 64,
         workers: Annotated[int, typer.Option(help="simulator worker processes")] = 2,
         db: Annotated[str | None, typer.Option(help="the tuning log to keep: a file path or a SQLAlchemy URL "
                                                     "(default: a file in a temporary directory)")] = None,
         target: Annotated[str, typer.Option()] = "sw26010",
         strategy: Annotated[str | None, typer.Option(help="default: model if available, else random")] = None
         ) -> None:
    """Tune AlexNet's conv and dense layers end to end (embedded server, simulator workers)."""
    from service.demo import run_demo

    results = run_demo(trials=trials, workers=workers, db_path=_url(db) if db is not None else None, target=target,
                       strategy=strategy)
    if any(r.tuned_s is None for r in results):
        raise typer.Exit(1)


# --- db ... -----------------------------------------------------------------------------------
def db_upgrade(database_url: DbUrl = None, revision: Annotated[str, typer.Option()] = "head") -> None:
    """Apply the Alembic migrations (alembic upgrade head)."""
    from db import migrate

    migrate.upgrade(_url(database_url), revision)
    typer.echo(f"database at revision {revision}")


def db_export(database_url: DbUrl = None,
              out: Annotated[Path | None, typer.Option(help="file (default: stdout)")] = None,
              target: Annotated[str | None, typer.Option()] = None,
              workload_key: Annotated[str | None, typer.Option()] = None) -> None:
    """Write the measurements as JSON lines."""
    from db import records

    tname = records.check_export_args(target=target, workload_key=workload_key)  # before any output
    stream = out.open("w") if out else sys.stdout
    try:
        with log_session(database_url) as s:
            for line in records.export_lines(s, target=tname, workload_key=workload_key):
                stream.write(line)
    finally:
        if out:
            stream.close()


def db_import(path: Annotated[Path, typer.Argument(help="JSON lines file from `swtune db export`")],
              database_url: DbUrl = None) -> None:
    """Import measurements (idempotent: records already present are skipped)."""
    from db import records

    f = path.open("rb")  # a missing file is reported before the database is touched
    with f, log_session(database_url) as s:
        stats = records.import_lines(s, f)
    typer.echo(f"imported {stats.imported}, skipped {stats.skipped} already present")


def build_db_app() -> typer.Typer:
    """``swtune db``: a new sub-app on each call."""
    return sub_app("The tuning log: migrations, export, import.",
                   [("upgrade", db_upgrade), ("export", db_export), ("import", db_import)])


# --- token ... --------------------------------------------------------------------------------
def token_create(role: Annotated[str, typer.Option(help="submit, worker, read or admin")],
                 name: Annotated[str, typer.Option(help="a label")] = "",
                 value: Annotated[str | None, typer.Option(
                     envvar="SWTUNE_TOKEN_VALUE", help="provision this secret instead of a random one")] = None,
                 if_missing: Annotated[bool, typer.Option(help="with --value: succeed if it exists")] = False,
                 database_url: DbUrl = None) -> None:
    """Create a token and print it (only its hash is stored: it cannot be shown again)."""
    from db import tokens
    from db.errors import ConflictError

    try:
        with log_session(database_url) as s:
            info, plaintext = tokens.create_token(s, role, name, value)
    except ConflictError:
        if not if_missing:
            raise
        typer.echo("token already present")
        return
    typer.echo(plaintext)
    typer.echo(f"token {info.id} ({info.role}{', ' + info.name if info.name else ''}) created", err=True)


def token_list(database_url: DbUrl = None) -> None:
    """List the tokens: id, role, label, state (never the secret)."""
    from db import tokens

    with log_session(database_url) as s:
        for t in tokens.list_tokens(s):
            state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
            typer.echo(f"{t.id}\t{t.role}\t{t.name}\t{state}")


def token_revoke(token_id: Annotated[int, typer.Argument()], database_url: DbUrl = None) -> None:
    """Revoke a token by its id."""
    from db import tokens

    with log_session(database_url) as s:
        tokens.revoke_token(s, token_id)
    typer.echo(f"token {token_id} revoked")


def build_token_app() -> typer.Typer:
    """``swtune token``: a new sub-app on each call."""
    return sub_app("API tokens (stored hashed).",
                   [("create", token_create), ("list", token_list), ("revoke", token_revoke)])
