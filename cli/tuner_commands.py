"""The tuner's commands: ``tune`` (also ``--op``), ``targets``, ``check-op``, ``compile``, ``tune-model``.

Each runs the tuner in this process; the tuner, TVM and torch are imported inside the commands, so
``swtune --help`` stays fast. Two commands may reach the service, and import it only then:
``compile --server`` looks schedules up over HTTP, and ``tune-model`` tunes through a server
(``--server``) or an embedded one (``service.embedded.embedded_service``). Errors are raised, not
printed: ``cli.errors`` turns them into one line and exit code 2.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.client_commands import DEFAULT_MODEL_TRIALS
from cli.errors import CommandError
from cli.output import console, warn
from cli.schedule_lookup import DEFAULT_CACHE, active_profile, db_lookup, profile_note, server_lookup
from cli.tuning_log import DB_HELP, database_url
from tuner.measure.noise import DEFAULT_NOISE

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
    from tuner.backends.expr_check import emulator_check
    from tuner.codegen.tilecheck import check_space
    from tuner.expr.workload import workload_from_op
    from tuner.space import space_for
    from tuner.space.expr_space import ExprSpace

    wl = workload_from_op(op, args)
    space = space_for(wl, target)
    assert isinstance(space, ExprSpace)
    tiles = check_space(space, configs, seed=seed, max_steps=max_steps)
    emu = emulator_check(space, configs, seed=seed)
    for problem in (emu.problems + tiles.problems)[:10]:
        console.print(f"[red]problem:[/red] {problem}")
    print(json.dumps({"workload": wl.key, "check": "emulator", **emu.as_json(), "tile_check": tiles.as_json()}))
    if (emu.wrong_results or emu.dma_count_mismatches or emu.tir_mismatches or emu.compile_failures
            or emu.runtime_errors or tiles.wrong_results or tiles.dma_count_mismatches):
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
    from cli.model_report import compile_report
    from tuner.aot import compile_model as aot_compile
    from tuner.aot.framework_style import calls_per_binding
    from tuner.bridge.extract import load_relax
    from tuner.targets import get_target

    tname = get_target(target).name
    if server:
        url = None
        lookup, close = server_lookup(server, token, tname, cache)
    else:
        url = database_url(db)
        lookup, close = db_lookup(url, tname)
    # simulated times (and the CPE offload decisions they drive) use the tuning log's active profile
    profile = active_profile(tname, server=server, token=token, db_url=url)
    handler = _ConsoleHandler(logging.WARNING)
    log = logging.getLogger("tuner.aot")
    log.addHandler(handler)
    try:
        mod = load_relax(model, batch, width, image)
        name = Path(model).stem if model.endswith(".onnx") else model
        calls = calls_per_binding(mod) if framework_style else None
        result = aot_compile(mod, profile.apply(tname) if profile else tname, out, lookup, name=name,
                             framework_style=calls)
    finally:
        log.removeHandler(handler)
        close()
    compile_report(result, _whole_model_note(profile, result.graph, result.kernels))


def _whole_model_note(profile: Any, graph: Any, kernels: list[Any]) -> str:
    """The report's note on the profile behind the simulated times, with the whole model's interval."""
    if profile is None:
        return ""
    from tuner.calibrate.intervals import program_interval

    return profile_note(profile, program_interval(profile, graph, {k.workload.key: k.config for k in kernels}))


# --- tune-model -------------------------------------------------------------------------------
# the help of a plain `--verbose` flag, as `--json` is one (a `--verbose/--no-verbose` pair widens the option column
# of the command's help, and so wraps every other option's help into a narrower one)
VERBOSE_HELP = ("list every task in the tuning table (default: the tasks that take most of the program, then one "
                "line for the rest)")


def _follow(client: Any, submitted: dict[str, Any], names: list[str], deadline: float,
            verbose: bool = False) -> list[dict[str, Any]]:
    """A live table of the submission's tasks (cli.task_table) until none is active (or the deadline passes)."""
    from rich.live import Live

    from cli.task_table import tasks_table
    from service.demo import follow_tasks

    def table(tasks: dict[int, dict[str, Any]]) -> Table:
        return tasks_table(tasks, submitted["task_ids"], names, verbose)

    with Live(table({}), console=console, refresh_per_second=4) as live:
        tasks = follow_tasks(client, submitted, deadline, lambda tasks: live.update(table(tasks)))
    if not console.is_terminal:  # off a terminal, Live ends its last frame without a line break
        console.line()
    return tasks


def tune_on_service(url: str, token: str | None, model: str, layers: list[Any], target: str, budget: int,
                    strategy: str | None, timeout: float, per_round: int = 16, verbose: bool = False
                    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Submit the model to the service at ``url`` as one submission (one budget, spread by the
    server's gradient task scheduler; ``per_round`` trials a grant), follow it (``verbose``: every
    task's row), and fetch the best schedules. The tasks come back in ``layers`` order."""
    from service.client import ServiceClient

    with ServiceClient(url, token) as client:
        name = Path(model).stem if model.endswith(".onnx") else model
        created = client.submit_model(name[:128], [{"name": l.name, "workload": l.workload.to_json(),
                                                     "calls": l.weight} for l in layers],
                                      target, budget, strategy=strategy, per_round=per_round)
        warn(created.get("warnings", []))
        # layers sharing a workload are one task on the server: follow the tasks, report per layer
        by_key = {t["workload_key"]: t["task_id"] for t in created["tasks"]}
        submitted = {"batch": created["id"], "task_ids": [t["task_id"] for t in created["tasks"]]}
        names = [", ".join(t["layer_names"]) for t in created["tasks"]]
        by_id = {t["id"]: t for t in _follow(client, submitted, names, time.monotonic() + timeout, verbose)}
        best = client.best_batch([l.workload.key for l in layers], target)["found"]
    return [by_id[by_key[l.workload.key]] for l in layers], best


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
    from cli.model_report import layer_report, whole_model_report
    from tuner.aot import AotError
    from tuner.aot.compiler import lower_model
    from tuner.aot.lookup import TuningLog
    from tuner.bridge.extract import extract_relax, load_relax, memory_bound, trial_budget
    from tuner.ir.relax_reader import read_relax
    from tuner.targets import get_target, with_cgs

    if cgs != 1:
        target = with_cgs(target, cgs).name
    get_target(target)
    if budget is not None and trials is not None:
        raise CommandError("give --trials (per task) or --budget (the whole model's), not both")
    log_url = None if server else database_url(db)  # a bad --db is refused before any work
    mod = load_relax(model, batch=batch, width=width, image=image)
    extracted = extract_relax(mod)
    try:
        read_relax(mod)  # every operator must compile before anything is tuned
    except AotError as exc:
        raise CommandError(f"{model} cannot be compiled for Sunway, nothing was tuned: {exc}") from exc
    layers = extracted.layers
    memory = [l for l in layers if memory_bound(l.workload)]
    whole = budget if budget is not None else trial_budget(layers, trials or DEFAULT_MODEL_TRIALS)
    console.print(f"[bold]{model}[/]: {len(layers)} tunable tasks ({len(memory)} memory-bound; "
                  f"{sum(l.weight for l in layers)} calls), one budget of {whole} trials; "
                  "not tuned here (legalized: CPE kernels, or C on the MPE): "
                  + (", ".join(f"{op} x{n}" for op, n in sorted(extracted.untuned.items())) or "none"))
    start = time.monotonic()
    if server:
        tasks, best = tune_on_service(server, token, model, layers, target, whole, strategy, timeout,
                                      verbose=verbose)
    else:
        from service.embedded import embedded_service

        assert log_url is not None
        # the compile command that reads this log, with the model options given here
        shape = [f"--{name} {value}" for name, value, default in
                 (("batch", batch, 1), ("width", width, 1.0), ("image", image, 224)) if value != default]
        hint = " ".join(["swtune compile", model, *shape, "-o DIR --db", shlex.quote(db or "swtune.db")])
        console.print(f"tuning log: {log_url} (`{hint}` reads it)", soft_wrap=True, highlight=False)
        with embedded_service(log_url, workers=workers, target=target) as service:
            tasks, best = tune_on_service(service.url, None, model, layers, target, whole, strategy, timeout,
                                          verbose=verbose)
    profile = active_profile(get_target(target).name, server=server, token=token, db_url=log_url)
    layer_report(layers, tasks, best, target, time.monotonic() - start, profile)
    # the program `swtune compile` would build from this log: fused, offloaded and grouped the same way
    program = lower_model(mod, profile.apply(target) if profile else target,
                          TuningLog(lambda w: best.get(w.key, {}).get("config")))
    whole_model_report(program.timing(), model, target, _whole_model_note(profile, program.graph, program.kernels))
