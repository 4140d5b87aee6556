"""The tuner's commands: ``tune`` (also ``--op``), ``targets``, ``check-op``, ``compile``, ``tune-model``.

``tune`` and ``targets`` run the tuner in this process; ``check-op``, ``compile`` and ``tune-model`` parse
their options, call the workflow of the swtune API (``swtune.check_op``, ``swtune.compile_model``,
``swtune.tune_model``) and print its result. The API, the tuner, TVM and torch are imported inside the
commands, so ``swtune --help`` stays fast. Errors are raised, not printed: ``cli.errors`` turns them into
one line and exit code 2.
"""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.model_report import compile_report, layer_report, profile_note, whole_model_report
from cli.output import console
from cli.progress import ConsoleProgress
from cli.tuning_log import DB_HELP
from swtune.tuning_log import DEFAULT_CACHE
from tuner.measure.noise import DEFAULT_NOISE

if TYPE_CHECKING:
    from swtune.results import TuningPlan

DEFAULT_WORKLOAD = '{"op": "conv2d", "n": 1, "c": 64, "h": 27, "w": 27, "k": 192, "r": 5, "s": 5, "padding": 2}'
MODEL_HELP = ("a zoo model (alexnet, vgg19, resnet18, resnet50, mobilenet_v2, bert_layer, vit_tiny) or a path "
              "to an .onnx file")

Target = Annotated[str, typer.Option(help=(
    "sw26010 or sw26010-pro; <preset>-<N>cg (sw26010-4cg) splits each kernel over up to N core groups"))]
CgsOpt = Annotated[int, typer.Option(help=(
    "core groups each kernel may be split over (1 to 4 on sw26010, 1 to 6 on sw26010-pro); the search "
    "picks how many per kernel"))]
Trials = Annotated[int, typer.Option(help="measurements per workload")]
Seed = Annotated[int, typer.Option()]
Width = Annotated[float, typer.Option(help="channel width multiplier of the built-in models")]
Image = Annotated[int, typer.Option(help="input image size of the built-in models")]
TokenOpt = Annotated[str | None, typer.Option(envvar="SWTUNE_TOKEN", help="bearer token for --server")]


# --- tune, targets ----------------------------------------------------------------------------
def tune(
    workload: Annotated[list[str] | None, typer.Option("--workload", "-w", help="workload JSON (repeatable)")] = None,
    model: Annotated[str | None, typer.Option(help="tune every layer of a model: alexnet, vgg19, resnet18")] = None,
    target: Target = "sw26010",
    trials: Trials = 200,
    strategy: Annotated[str, typer.Option(help="search strategy")] = "model",
    batch: Annotated[int, typer.Option("--per-round", help="configs measured per search round")] = 32,
    seed: Seed = 0,
    noise: Annotated[float, typer.Option(help="relative measurement noise of the simulator")] = DEFAULT_NOISE,
    json_out: Annotated[bool, typer.Option("--json", help="print the results as JSON lines")] = False,
    op: Annotated[str | None, typer.Option(help="an operator as a tensor expression: FILE.py:FUNC")] = None,
    args: Annotated[str | None, typer.Option(help="JSON keyword arguments of --op's function")] = None,
    profile_file: Annotated[Path | None, typer.Option(
        "--profile", help="a calibrated simulator profile (JSON, from `swtune calibrate --out`): the simulator "
                          "measures with it and each best time gets its 95% interval")] = None,
    rank_quantile: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, show_default=False,
        help="with --profile: rank configs by this quantile of their time over the profile's uncertainty "
             "(0.5 the median, 0.9 pessimistic) instead of by the measured time; the times shown stay "
             "the measured ones")] = None,
) -> None:
    """Tune workloads in-process on the simulator and print the best config, its time and GFLOPS."""
    if op:
        return _tune_op(op, args, target, trials, strategy, batch, seed, noise, json_out)
    if rank_quantile is not None and profile_file is None:
        raise CommandError("--rank-quantile needs --profile: the quantile is taken over a fitted profile's draws")
    profile = _read_profile(profile_file, target) if profile_file is not None else None
    from tuner.models import model_layers
    from tuner.tune import tune_workloads
    from tuner.workloads import workload_from_json

    if model:
        layers = model_layers(model)
        names = [layer.name for layer in layers]
        workloads = [layer.workload for layer in layers]
    else:
        workloads = [workload_from_json(w) for w in (workload or [DEFAULT_WORKLOAD])]
        names = [w.op for w in workloads]
    results = tune_workloads(workloads, target, trials=trials, strategy=strategy, batch=batch, seed=seed,
                             noise=noise, console=None if json_out else console, profile=profile,
                             rank_quantile=rank_quantile)
    if json_out:
        for name, r in zip(names, results):
            print(json.dumps({"name": name, "workload": r.workload.key, "best_time_s": r.best_time,
                              "best_time_interval_s": r.best_interval, "gflops": r.gflops, "trials": r.trials,
                              "best_config": r.best_config}))
        return
    version = f", profile version {profile.version}" if profile is not None else ""
    version += f", ranked by the {rank_quantile:g} quantile" if rank_quantile is not None else ""
    table = Table(title=f"swtune on {target} (simulator{version})")
    columns = ["layer", "workload", "trials", "best time (ms)", *(["95% interval (ms)"] if profile else []), "GFLOPS"]
    for col in columns:
        table.add_column(col, justify="right" if col not in ("layer", "workload") else "left")
    for name, r in zip(names, results):
        interval = [f"{r.best_interval[0] * 1e3:.4f} - {r.best_interval[1] * 1e3:.4f}" if r.best_interval
                    else "none (profile without a fit)"] if profile else []
        table.add_row(name, r.workload.key, str(r.trials), f"{r.best_time * 1e3:.4f}", *interval, f"{r.gflops:.1f}")
    console.print(table)
    for name, r in zip(names, results):
        console.print(f"[bold]{name}[/bold] best config: {json.dumps(r.best_config)}")


def _read_profile(path: Path, target: str) -> Any:
    """A profile document from a file (``swtune calibrate --out``), for ``target``."""
    from tuner.profile import Profile
    from tuner.targets import get_target

    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"cannot read the profile {path}: {exc}") from None
    profile = Profile.from_json(document)
    if profile.target != get_target(target).base_name:
        raise CommandError(f"{path} is a profile of {profile.target}, not of {target}")
    return profile


def _tune_op(op: str, args: str | None, target: str, trials: int, strategy: str, batch: int, seed: int,
             noise: float, json_out: bool) -> None:
    """``tune --op``: one expression operator, with its naive and OpenACC-like baselines."""
    from tuner.expr.workload import workload_from_op
    from tuner.space.expr_space import ExprSpace
    from tuner.tune_expr import naive_and_baseline_seconds, tune_expr

    wl = workload_from_op(op, args)
    result = tune_expr(wl, target, trials=trials, strategy=strategy, batch=batch, seed=seed, noise=noise)
    naive, baseline = naive_and_baseline_seconds(ExprSpace(wl, target))
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


def targets() -> None:
    """List the target presets and their main figures."""
    from tuner.targets import TARGETS

    table = Table(caption="figures per core group; <name>-<N>cg (--cgs N) splits kernels over N of the chip's CGs")
    for col in ("name", "clock GHz", "LDM budget KB", "fp64 peak GFLOPS", "mem GB/s", "sharing", "CGs per chip"):
        table.add_column(col)
    for t in TARGETS.values():
        table.add_row(t.name, f"{t.clock_hz / 1e9:.2f}", f"{t.ldm_budget_bytes // 1024}",
                      f"{t.peak_flops('float64') / 1e9:.1f}", f"{t.mem_bandwidth_Bps / 1e9:.1f}", t.sharing,
                      str(t.cgs_per_chip))
    console.print(table)


# --- check-op ---------------------------------------------------------------------------------
def check_op(
    op: Annotated[str, typer.Argument(help="the operator: FILE.py:FUNC")],
    args: Annotated[str | None, typer.Option(help="JSON keyword arguments of the function")] = None,
    target: Target = "sw26010",
    configs: Annotated[int, typer.Option(help="random valid configs to check")] = 50,
    seed: Seed = 0,
    max_steps: Annotated[int, typer.Option(help="skip configs with more (tile, k tile) steps than this")] = 1500,
) -> None:
    """Build random valid configs of an operator on the emulator and check them, and its tiles.

    Each config's athread C (slave + host) is generated, built against swemu and run; its output is
    compared with TVM's llvm run of the same expression, and its DMA counts (emulator counters and the
    lowered TIR) with the analysis. A tile check (each output tile computed in numpy only from the
    boxes its schedule fetches) runs on the same number of configs. Last line: JSON (the emulator
    figures, the tile check's under ``tile_check``)."""
    import swtune

    check = swtune.check_op(op, args, target=target, configs=configs, seed=seed, max_steps=max_steps)
    for problem in check.problems[:10]:
        console.print(f"[red]problem:[/red] {problem}")
    print(json.dumps(check.as_json()))
    if check.failed:
        raise typer.Exit(1)


# --- compile ----------------------------------------------------------------------------------
class _ConsoleHandler(logging.Handler):
    """Shows the compiler's fallback warnings in the console (they name the workload)."""

    def emit(self, record: logging.LogRecord) -> None:
        console.print(f"[yellow]warning:[/] {record.getMessage()}", highlight=False, soft_wrap=True)


def compile_model(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory")],
    target: Target = "sw26010",
    server: Annotated[str | None, typer.Option(help="look schedules up on a running swtune service")] = None,
    token: TokenOpt = None,
    db: Annotated[str | None, typer.Option(envvar="SWTUNE_DATABASE_URL", help=DB_HELP)] = None,
    cache: Annotated[Path, typer.Option(help="cache file of --server lookups")] = DEFAULT_CACHE,
    batch: Annotated[int, typer.Option(help="model batch size")] = 1,
    width: Width = 1.0,
    image: Image = 224,
    framework_style: Annotated[bool, typer.Option("--framework-style", help=(
        "compile the model as a framework on a Sunway operator library runs it (the reference): one library "
        "call per primitive operator, each its own spawn, nothing fused across operators"))] = False,
) -> None:
    """Compile a whole model ahead of time: host C, tuned slave kernels, weights.bin, Makefile."""
    import swtune

    handler = _ConsoleHandler(logging.WARNING)
    log = logging.getLogger("tuner.aot")
    log.addHandler(handler)
    try:
        compiled = swtune.compile_model(model, out, target=target, db=db, server=server, token=token, cache=cache,
                                        batch=batch, width=width, image=image, framework_style=framework_style,
                                        progress=ConsoleProgress())
    finally:
        log.removeHandler(handler)
    compile_report(compiled.program, profile_note(compiled.profile, compiled.interval))


# --- tune-model -------------------------------------------------------------------------------
# the help of a plain `--verbose` flag, as `--json` is one (a `--verbose/--no-verbose` pair widens the option column
# of the command's help, and so wraps every other option's help into a narrower one)
VERBOSE_HELP = ("list every task in the tuning table (default: the tasks that take most of the program, then one "
                "line for the rest)")


class _TuneModelProgress(ConsoleProgress):
    """``tune-model``'s stages: the tasks and the budget, then (embedded) the log and the compile that reads it."""

    def __init__(self, model: str, compile_hint: str | None, verbose: bool) -> None:
        super().__init__(verbose)
        self.model, self.compile_hint = model, compile_hint

    def tuning_planned(self, plan: TuningPlan) -> None:
        console.print(f"[bold]{self.model}[/]: {len(plan.layers)} tunable tasks ({plan.memory_bound} memory-bound; "
                      f"{plan.calls} calls), one budget of {plan.budget} trials; "
                      "not tuned here (legalized: CPE kernels, or C on the MPE): "
                      + (", ".join(f"{op} x{n}" for op, n in sorted(plan.untuned_ops.items())) or "none"))
        if self.compile_hint is not None:
            console.print(f"tuning log: {plan.log_url} (`{self.compile_hint}` reads it)", soft_wrap=True,
                          highlight=False)


def tune_model(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    target: Target = "sw26010",
    cgs: CgsOpt = 1,
    server: Annotated[str | None, typer.Option(help="URL of a running swtune service (default: embedded)")] = None,
    token: TokenOpt = None,
    trials: Annotated[int | None, typer.Option(min=1, show_default=False, help=(
        "trials per task: the model is one submission whose one budget is this per GEMM-like task plus a quarter "
        "of it (at least 8) per memory-bound task [default: 64]"))] = None,
    budget: Annotated[int | None, typer.Option(min=1, show_default=False, help=(
        "the trial budget of the whole model instead (spread over its tasks by the task scheduler)"))] = None,
    workers: Annotated[int, typer.Option(help="simulator workers in embedded mode")] = 2,
    strategy: Annotated[str | None, typer.Option(help="search strategy")] = None,
    batch: Annotated[int, typer.Option("--batch-size", help="the model's batch size")] = 1,
    width: Width = 1.0,
    image: Image = 224,
    timeout: Annotated[float, typer.Option(help="give up following the tasks after this many seconds")] = 1800.0,
    db: Annotated[str | None, typer.Option(envvar="SWTUNE_DATABASE_URL",
                                           help=DB_HELP + "; embedded mode keeps it for `swtune compile`")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help=VERBOSE_HELP)] = False,
) -> None:
    """Tune every task of a model (conv / dense / batch_matmul, expression operators, memory-bound
    operators) and report the per-layer result.

    Memory-bound operators whose legalized PrimFunc is one compute block (element-wise, single-input
    reductions, unpadded max pools, transposes) are expression tasks; compile runs their tuned kernel
    where it simulates faster than the rule-picked CPE blocks. Before any tuning the whole model goes
    through the AOT compiler's reader (legalization and C for every operator without a kernel): an
    operator that cannot compile is named with its binding and nothing is submitted. Embedded (the
    default): the tuning log at ``--db``, the API on a free loopback port and simulator worker
    processes, as ``swtune demo`` runs them.

    The model's one trial budget is ``--trials`` per task (the same meaning as everywhere), or
    ``--budget`` for the whole model. A budget too small to give every task its baseline and a few
    trials is warned about; a task that ends without a successful measurement is reported untuned,
    and ``swtune compile`` runs it untuned."""
    import swtune

    if budget is not None and trials is not None:
        raise CommandError("give --trials (per task) or --budget (the whole model's), not both")
    hint = None
    if not server:
        # the compile command that reads this log, with the model options given here
        shape = [f"--{name} {value}" for name, value, default in
                 (("batch", batch, 1), ("width", width, 1.0), ("image", image, 224)) if value != default]
        hint = " ".join(["swtune compile", model, *shape, "-o DIR --db", shlex.quote(db or "swtune.db")])
    result = swtune.tune_model(model, target=target, cgs=cgs, trials=trials, budget=budget, db=db, server=server,
                               token=token, workers=workers, strategy=strategy, batch=batch, width=width,
                               image=image, timeout=timeout, progress=_TuneModelProgress(model, hint, verbose))
    layer_report(result)
    whole_model_report(result.timing, model, result.target, profile_note(result.profile, result.interval))
