"""CLI of operators written as tensor expressions: ``swtune tune --op FILE.py:FUNC`` and ``swtune check-op``.

``FILE.py:FUNC`` is called with ``--args`` (a JSON object of keyword arguments) and returns TVM
tensors, inputs first and the output last (examples/ops/). Errors are one line and exit code 2.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

console = Console()
EXIT_ERROR = 2


def tune_op(op: str, args: str | None, target: str, trials: int, strategy: str, batch: int, seed: int,
            noise: float, json_out: bool) -> None:
    """Tune one expression operator in-process on the simulator (called by ``swtune tune --op``)."""
    from tuner.errors import SwtuneError
    from tuner.expr.space import ExprSpace
    from tuner.expr.tune import naive_and_baseline_seconds, tune_expr
    from tuner.expr.workload import workload_from_op

    try:
        wl = workload_from_op(op, args)
        result = tune_expr(wl, target, trials=trials, strategy=strategy, batch=batch, seed=seed, noise=noise)
        naive, baseline = naive_and_baseline_seconds(ExprSpace(wl, target))
    except (SwtuneError, ValueError) as exc:
        typer.echo("error: " + " ".join(str(exc).split()), err=True)
        raise typer.Exit(EXIT_ERROR) from None
    line = {"name": wl.name, "workload": wl.key, "best_time_s": result.best_time, "gflops": result.gflops,
            "trials": result.trials, "naive_time_s": naive, "openacc_time_s": baseline,
            "over_naive": naive / result.best_time, "over_openacc": baseline / result.best_time,
            "best_config": result.best_config}
    if json_out:
        print(json.dumps(line))
        return
    table = Table(title=f"swtune on {target} (simulator)")
    for col in ("operator", "workload", "trials", "best time (ms)", "GFLOPS", "x naive", "x OpenACC-like"):
        table.add_column(col)
    table.add_row(wl.name, wl.key, str(result.trials), f"{result.best_time * 1e3:.4f}", f"{result.gflops:.1f}",
                  f"{naive / result.best_time:.1f}", f"{baseline / result.best_time:.1f}")
    console.print(table)
    console.print(f"[bold]best config:[/bold] {json.dumps(result.best_config)}")



def register(app: typer.Typer) -> None:
    """Add ``check-op`` to the main app (``tune --op`` is an option of the tune command)."""

    @app.command("check-op")
    def check_op(
        op: Annotated[str, typer.Argument(help="the operator: FILE.py:FUNC")],
        args: Annotated[str | None, typer.Option(help="JSON keyword arguments of the function")] = None,
        target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
        configs: Annotated[int, typer.Option(help="random valid configs to check")] = 50,
        seed: Annotated[int, typer.Option()] = 0,
        max_steps: Annotated[int, typer.Option(help="skip configs with more (tile, k tile) steps than this")] = 1500,
    ) -> None:
        """Check random valid configs of an operator tile by tile: each output tile computed only from
        the operand boxes its schedule fetches, against TVM's llvm run of the whole expression, and
        the DMA requests of those fetches against the analysis. Athread C for expression operators
        is not generated yet, so nothing is compiled: ``compile_failures`` is null. Last line: JSON."""
        from tuner.errors import SwtuneError
        from tuner.expr.space import ExprSpace
        from tuner.expr.tilecheck import check_space
        from tuner.expr.workload import workload_from_op

        try:
            wl = workload_from_op(op, args)
            summary = check_space(ExprSpace(wl, target), configs, seed=seed, max_steps=max_steps)
        except (SwtuneError, ValueError) as exc:
            typer.echo("error: " + " ".join(str(exc).split()), err=True)
            raise typer.Exit(EXIT_ERROR) from None
        for problem in summary.problems[:10]:
            console.print(f"[red]problem:[/red] {problem}")
        print(json.dumps({"workload": wl.key, "check": "tiles", **summary.as_json(), "compile_failures": None}))
        if summary.wrong_results or summary.dma_count_mismatches:
            raise typer.Exit(1)
