"""`swtune tune-model`: extract a model's tasks, tune them (embedded or on a server), report per layer.

Before any tuning the whole model goes through the AOT compiler's reader (legalization and C for
every operator without a kernel): an operator that cannot compile is named with its binding and
nothing is submitted. Embedded (the default): the tuning log at ``--db`` (default
SWTUNE_DATABASE_URL, i.e. ./swtune.db, where ``swtune compile`` reads it), the API on a free loopback
port and simulator worker processes on this machine, as `swtune demo` runs them. With ``--server
URL`` the tasks go to a running service and its workers. Either way the run ends with the per-layer
table (baseline = OpenACC-like schedule, tuned = best measured) and the estimated end-to-end time.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

console = Console()


def _follow(client: Any, submitted: dict[str, Any], names: list[str], deadline: float) -> list[dict[str, Any]]:
    from rich.live import Live

    def table(tasks: dict[int, dict[str, Any]]) -> Table:
        t = Table(title="tuning tasks")
        for col in ("layer", "state", "trials", "best ms"):
            t.add_column(col, justify="left" if col in ("layer", "state") else "right")
        for tid, name in zip(submitted["task_ids"], names):
            task = tasks.get(tid, {})
            best = task.get("best_time")
            t.add_row(name, task.get("state", "?"), f"{task.get('trials_done', 0)}/{task.get('trial_budget', '?')}",
                      f"{best * 1e3:.4f}" if best else "-")
        return t

    with Live(table({}), console=console, refresh_per_second=4) as live:
        while True:
            tasks = {t["id"]: t for t in client.tasks(batch=submitted["batch"])}
            live.update(table(tasks))
            if all(tasks[tid]["state"] != "active" for tid in submitted["task_ids"]) or time.monotonic() > deadline:
                return [tasks[tid] for tid in submitted["task_ids"]]
            time.sleep(0.5)


def _run(url: str, token: str | None, layers: list[Any], target: str, trials: int, strategy: str | None,
         timeout: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from service.client import ServiceClient

    with ServiceClient(url, token) as client:
        submitted = client.submit([l.workload.to_json() for l in layers], target, trials, strategy=strategy,
                                  labels=[l.name for l in layers])
        tasks = _follow(client, submitted, [l.name for l in layers], time.monotonic() + timeout)
        best = client.best_batch([l.workload.key for l in layers], target)["found"]
    return tasks, best


def tune_model(
    model: Annotated[str, typer.Argument(help="a zoo model (alexnet, vgg19, resnet18, resnet50, mobilenet_v2, "
                                              "bert_layer, vit_tiny) or a path to an .onnx file")],
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    server: Annotated[str | None, typer.Option(help="URL of a running swtune service (default: embedded)")] = None,
    token: Annotated[str | None, typer.Option(envvar="SWTUNE_TOKEN", help="bearer token for --server")] = None,
    trials: Annotated[int, typer.Option(help="trials per task")] = 64,
    workers: Annotated[int, typer.Option(help="simulator workers in embedded mode")] = 2,
    strategy: Annotated[str | None, typer.Option(help="search strategy")] = None,
    batch: Annotated[int, typer.Option("--batch-size", help="the model's batch size")] = 1,
    width: Annotated[float, typer.Option(help="channel width multiplier of the built-in models")] = 1.0,
    image: Annotated[int, typer.Option(help="input image size of the built-in models")] = 224,
    timeout: Annotated[float, typer.Option(help="give up following the tasks after this many seconds")] = 1800.0,
    db: Annotated[str | None, typer.Option(help="embedded tuning log URL (default: SWTUNE_DATABASE_URL, "
                                                   "sqlite:///./swtune.db), read by `swtune compile`")] = None,
) -> None:
    """Tune every conv / dense / batch_matmul task of a model and report the per-layer result."""
    from tuner.aot import AotError
    from tuner.aot.relax_reader import read_relax
    from tuner.bridge.extract import extract_relax, load_relax
    from tuner.errors import SwtuneError
    from tuner.targets import get_target

    try:
        get_target(target)
        mod = load_relax(model, batch=batch, width=width, image=image)
        extracted = extract_relax(mod)
        graph = read_relax(mod)  # every operator must compile before anything is tuned
    except AotError as exc:
        console.print(f"[red]error:[/red] {model} cannot be compiled for Sunway, nothing was tuned: {exc}")
        raise typer.Exit(2) from None
    except (SwtuneError, ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    layers = extracted.layers
    console.print(f"[bold]{model}[/]: {len(layers)} tunable tasks "
                  f"({sum(l.weight for l in layers)} calls); not tuned here (legalized, plain C on the MPE): "
                  + (", ".join(f"{op} x{n}" for op, n in sorted(extracted.untuned.items())) or "none"))
    start = time.monotonic()
    if server:
        tasks, best = _run(server, token, layers, target, trials, strategy, timeout)
    else:
        from db import migrate
        from db.engine import Database
        from service.app import create_app
        from service.demo import start_workers, stop_workers
        from service.embedded import EmbeddedServer
        from service.settings import Settings

        url = db or Settings().database_url
        migrate.upgrade(url)
        console.print(f"tuning log: {url} (`swtune compile {model} --db {url}` reads it)", soft_wrap=True)
        settings = Settings(database_url=url, auth_enabled=False, lease_seconds=30, queue_depth=16,
                            driver_interval_seconds=0.2, lookup_cache_seconds=0)
        database = Database(url)
        try:
            with EmbeddedServer(create_app(settings, db=database)) as embedded:
                procs = start_workers(embedded.url, workers, target)
                try:
                    tasks, best = _run(embedded.url, None, layers, target, trials, strategy, timeout)
                finally:
                    stop_workers(procs)
        finally:
            database.dispose()
    report(layers, tasks, best, target, time.monotonic() - start)
    from tuner.aot.timing import model_time

    whole_model_report(model_time(graph, target, lambda w: best.get(w.key, {}).get("config")), model, target)


def whole_model_report(mt: Any, model: str, target: str) -> None:
    """The simulated end-to-end time of the whole model, per operator, tuned vs baseline program."""
    from tuner.aot.timing import format_table

    table = Table(title=f"{model} on {target}: simulated end-to-end time by operator (tuned program)")
    for col in ("operator", "where", "calls", "tuned ms", "share", "baseline ms", "baseline share"):
        table.add_column(col, justify="left" if col in ("operator", "where") else "right")
    for row in format_table(mt):
        table.add_row(*row)
    console.print(table)
    sm = mt.summary()
    console.print(f"whole model (simulated): tuned {sm['tuned_ms']:.3f} ms, OpenACC-like baseline "
                  f"{sm['baseline_ms']:.3f} ms ({sm['speedup_vs_baseline']:.2f}x); MPE {sm['mpe_ms']:.3f} ms "
                  f"({sm['mpe_time_fraction']:.1%}); {sm['kernel_launches']} kernel launches, "
                  f"spawn/join {sm['spawn_join_ms']:.3f} ms included.", soft_wrap=True)


def report(layers: list[Any], tasks: list[dict[str, Any]], best: dict[str, Any], target: str, elapsed: float) -> None:
    from service.demo import baselines

    base = baselines(layers, target)
    table = Table(title=f"per-layer result on {target}")
    for col in ("layer", "calls", "trials", "baseline ms", "tuned ms", "speedup", "GFLOPS"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    total_base = total_tuned = 0.0
    for layer, task in zip(layers, tasks):
        found = best.get(layer.workload.key)
        tuned = found["mean_time"] if found else None
        b = base[layer.name]
        total_base += layer.weight * b
        total_tuned += layer.weight * (tuned if tuned else b)
        table.add_row(layer.name, str(layer.weight), str(task.get("trials_done", 0)), f"{b * 1e3:.3f}",
                      f"{tuned * 1e3:.3f}" if tuned else "-", f"{b / tuned:.2f}x" if tuned else "-",
                      f"{layer.workload.flops / tuned / 1e9:.1f}" if tuned else "-")
    console.print(table)
    console.print(f"estimated end-to-end time of the tuned operators: {total_tuned * 1e3:.3f} ms "
                  f"(baseline {total_base * 1e3:.3f} ms, {total_base / total_tuned:.2f}x); the whole model "
                  f"follows. {elapsed:.0f} s.")


def register(app: typer.Typer) -> None:
    app.command("tune-model")(tune_model)
