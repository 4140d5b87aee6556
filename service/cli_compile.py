"""`swtune compile`: ahead-of-time output of a whole model for Sunway, tuned schedules looked up.

The schedules come from a running service (``--server URL``: GET /schedules/best per workload) or,
by default, straight from the local tuning log (``--db``, default SWTUNE_DATABASE_URL). A workload
with no tuned schedule (or no tuning log at all) falls back to the default schedule with a warning
naming it. The table at the end says, per Relax binding, what became a tuned kernel, what fell back
and what runs as plain C on the MPE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

console = Console()

# where `compile --server` keeps the schedules it looked up
DEFAULT_CACHE = Path.home() / ".cache" / "swtune" / "schedules.json"

Lookup = Callable[[Any], "dict[str, Any] | None"]


def load_relax(model: str, batch: int, width: float, image: int) -> Any:
    """The Relax module of a zoo model (tuner.models.torch_models) or of an .onnx file."""
    from tuner.bridge.extract import load_relax as load

    return load(model, batch, width, image)


def server_lookup(url: str, token: str | None, target: str, cache: Path | None = None
                  ) -> tuple[Lookup, Callable[[], None]]:
    """Lookup over HTTP with a local cache file: the service answers once per workload, later builds
    (and builds while the service is down) answer from the cache; nothing known means untuned."""
    from service.lookup import ScheduleLookup

    lookup = ScheduleLookup(url, target, cache_file=cache, timeout=10.0, token=token)
    return lookup.best, lambda: None


def db_lookup(url: str | None, target: str) -> tuple[Lookup, Callable[[], None]]:
    """Lookup in the local tuning log; no database (or no tables) means every workload is untuned."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from db.engine import Database, normalize_url
    from db.errors import NotFoundError
    from db.measurements import best_config
    from service.settings import Settings

    url = url or Settings().database_url
    parsed = make_url(normalize_url(url))
    none: Lookup = lambda w: None  # noqa: E731
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).exists():
        console.print(f"[yellow]warning:[/] no tuning log at {url}: every workload is untuned "
                      "(default schedules)", soft_wrap=True)
        return none, lambda: None
    database = Database(url)
    broken: list[str] = []

    def lookup(workload: Any) -> dict[str, Any] | None:
        if broken:
            return None
        try:
            with database.session() as s:
                return dict(best_config(s, workload.key, target).config)
        except NotFoundError:
            return None
        except SQLAlchemyError as exc:  # e.g. a database without the swtune tables
            broken.append(str(exc))
            console.print(f"[yellow]warning:[/] cannot read the tuning log at {url} "
                          f"({type(exc).__name__}): every workload is untuned", soft_wrap=True)
            return None

    return lookup, database.dispose


class _ConsoleHandler(logging.Handler):
    """Shows the compiler's fallback warnings in the console (they name the workload)."""

    def emit(self, record: logging.LogRecord) -> None:
        console.print(f"[yellow]warning:[/] {record.getMessage()}", highlight=False, soft_wrap=True)


_STYLE = {"tuned kernel": "green", "fallback kernel": "yellow", "MPE": "cyan"}


def print_report(result: Any) -> None:
    table = Table(title=f"{result.out_dir} ({result.target})")
    for col in ("#", "binding", "op", "where", "detail"):
        table.add_column(col, justify="right" if col == "#" else "left")
    for i, r in enumerate(result.rows):
        style = _STYLE.get(r.where, "dim")
        table.add_row(str(i), r.source, r.relax_op, f"[{style}]{r.where}[/]", r.detail)
    console.print(table)
    counts = result.counts()
    untuned = [k for k in result.kernels if not k.tuned]
    console.print(f"{counts.get('tuned kernel', 0)} tuned kernel calls, {counts.get('fallback kernel', 0)} "
                  f"fallback kernel calls ({len(untuned)} of {len(result.kernels)} distinct kernels untuned), "
                  f"{counts.get('MPE', 0)} MPE steps, {counts.get('view (no-op)', 0)} views, "
                  f"{counts.get('compile time', 0)} folded at compile time.", soft_wrap=True)
    if result.timing is not None:
        from service.cli_model import whole_model_report

        whole_model_report(result.timing, result.out_dir.name, result.target)
    console.print(f"wrote {', '.join(result.files)} to {result.out_dir}; build with "
                  f"`make -C {result.out_dir}` (Sunway) or `make -C {result.out_dir} emu` (x86 emulator), "
                  f"run `./model weights.bin input.bin output.bin`.", soft_wrap=True)


def compile_cmd(
    model: Annotated[str, typer.Argument(help="a zoo model (alexnet, vgg19, resnet18, resnet50, mobilenet_v2, "
                                              "bert_layer, vit_tiny) or a path to an .onnx file")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory")],
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    server: Annotated[str | None, typer.Option(help="look schedules up on a running swtune service")] = None,
    token: Annotated[str | None, typer.Option(envvar="SWTUNE_TOKEN", help="bearer token for --server")] = None,
    db: Annotated[str | None, typer.Option(help="tuning log URL (default: SWTUNE_DATABASE_URL)")] = None,
    cache: Annotated[Path, typer.Option(help="cache file of --server lookups")] = DEFAULT_CACHE,
    batch: Annotated[int, typer.Option(help="model batch size")] = 1,
    width: Annotated[float, typer.Option(help="channel width multiplier of the built-in models")] = 1.0,
    image: Annotated[int, typer.Option(help="input image size of the built-in models")] = 224,
) -> None:
    """Compile a whole model ahead of time: host C, tuned slave kernels, weights.bin, Makefile."""
    import httpx

    from service.client import ServiceError
    from tuner.aot import AotError, compile_model
    from tuner.errors import SwtuneError
    from tuner.targets import get_target

    try:
        tname = get_target(target).name
    except SwtuneError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    lookup, close = server_lookup(server, token, tname, cache) if server else db_lookup(db, tname)
    handler = _ConsoleHandler(logging.WARNING)
    log = logging.getLogger("tuner.aot")
    log.addHandler(handler)
    try:
        mod = load_relax(model, batch, width, image)
        name = Path(model).stem if model.endswith(".onnx") else model
        result = compile_model(mod, tname, out, lookup, name=name)
    except (AotError, SwtuneError, ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    except (httpx.HTTPError, ServiceError) as exc:
        console.print(f"[red]error:[/red] schedule lookup on {server} failed: {exc}")
        raise typer.Exit(2) from None
    finally:
        log.removeHandler(handler)
        close()
    print_report(result)


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)
