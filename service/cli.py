"""The `swtune` command line (typer): tuning in-process, and the service's commands."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from service.cli_compile import register as _register_compile
from service.cli_model import register as _register_model
from service.cli_ops import register as _register_ops
from service.cli_service import register as _register_service
from service.cli_tasks import register as _register_tasks
from tuner.measure.noise import DEFAULT_NOISE

app = typer.Typer(no_args_is_help=True, help="Autotune deep-learning operators for Sunway processors.")
console = Console()

DEFAULT_WORKLOAD = '{"op": "conv2d", "n": 1, "c": 64, "h": 27, "w": 27, "k": 192, "r": 5, "s": 5, "padding": 2}'


@app.command()
def tune(
    workload: Annotated[list[str] | None, typer.Option("--workload", "-w", help="workload JSON (repeatable)")] = None,
    model: Annotated[str | None, typer.Option(help="tune every layer of a model: alexnet, vgg19, resnet18")] = None,
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    trials: Annotated[int, typer.Option(help="measurements per workload")] = 200,
    strategy: Annotated[str, typer.Option(help="search strategy")] = "model",
    batch: Annotated[int, typer.Option("--per-round", help="configs measured per search round")] = 32,
    seed: Annotated[int, typer.Option()] = 0,
    noise: Annotated[float, typer.Option(help="relative measurement noise of the simulator")] = DEFAULT_NOISE,
    json_out: Annotated[bool, typer.Option("--json", help="print the results as JSON lines")] = False,
    op: Annotated[str | None, typer.Option(help="an operator as a tensor expression: FILE.py:FUNC")] = None,
    args: Annotated[str | None, typer.Option(help="JSON keyword arguments of --op's function")] = None,
) -> None:
    """Tune workloads in-process on the simulator and print the best config, its time and GFLOPS."""
    if op:
        from service.cli_ops import tune_op

        return tune_op(op, args, target, trials, strategy, batch, seed, noise, json_out)
    from tuner.errors import SwtuneError
    from tuner.models import model_layers
    from tuner.tune import tune_workloads
    from tuner.workloads import workload_from_json

    try:
        if model:
            layers = model_layers(model)
            names = [layer.name for layer in layers]
            workloads = [layer.workload for layer in layers]
        else:
            workloads = [workload_from_json(w) for w in (workload or [DEFAULT_WORKLOAD])]
            names = [w.op for w in workloads]
        results = tune_workloads(workloads, target, trials=trials, strategy=strategy, batch=batch, seed=seed,
                                 noise=noise, console=None if json_out else console)
    except (SwtuneError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if json_out:
        for name, r in zip(names, results):
            print(json.dumps({"name": name, "workload": r.workload.key, "best_time_s": r.best_time,
                              "gflops": r.gflops, "trials": r.trials, "best_config": r.best_config}))
        return
    table = Table(title=f"swtune on {target} (simulator)")
    for col in ("layer", "workload", "trials", "best time (ms)", "GFLOPS"):
        table.add_column(col, justify="right" if col not in ("layer", "workload") else "left")
    for name, r in zip(names, results):
        table.add_row(name, r.workload.key, str(r.trials), f"{r.best_time * 1e3:.4f}", f"{r.gflops:.1f}")
    console.print(table)
    for name, r in zip(names, results):
        console.print(f"[bold]{name}[/bold] best config: {json.dumps(r.best_config)}")


@app.command()
def targets() -> None:
    """List the target presets and their main figures."""
    from tuner.targets import TARGETS

    table = Table()
    for col in ("name", "clock GHz", "LDM budget KB", "fp64 peak GFLOPS", "mem GB/s", "sharing"):
        table.add_column(col)
    for t in TARGETS.values():
        table.add_row(t.name, f"{t.clock_hz / 1e9:.2f}", f"{t.ldm_budget_bytes // 1024}",
                      f"{t.peak_flops('float64') / 1e9:.1f}", f"{t.mem_bandwidth_Bps / 1e9:.1f}", t.sharing)
    console.print(table)


# the service, model, compile, task and operator commands live in their own modules
_register_service(app)
_register_model(app)
_register_compile(app)
_register_tasks(app)
_register_ops(app)
