"""``swtune train``: a model, a loss and an optimizer compiled into one training-step program for
Sunway, tuned, and run for N steps on the emulator.

The step (forward, loss, backward, update: tuner.ir.training) is one Relax function; its tasks are
extracted and tuned as one submission like ``tune-model``'s (``--trials 0`` skips tuning), the program is
compiled ahead of time (host and slave C, Makefile for sw5cc/swgcc and ``make emu``) and, unless
``--no-run``, built for the emulator and run, writing the losses. TVM and torch are imported inside.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.output import console
from cli.tuner_commands import VERBOSE_HELP
from cli.tuning_log import DB_HELP, database_url

MODEL_HELP = ("mlp, cnn, resnet18_small, transformer, a zoo model (resnet18, mobilenet_v2, ...), FILE.py:FUNC "
              "returning (torch module, example inputs), or FILE.onnx (its batch norms frozen)")
DEFAULT_BATCH = 8
# Without --trials, train tunes the step with this budget first (not --overlap): a first run then reports a
# tuned step, and --trials 0 is the explicit "no tuning" (issue #46)
DEFAULT_TRIALS = 8
FRAMEWORK_STYLE_HELP = ("run the step as a framework on a Sunway operator library does (the reference swtune is "
                        "measured against): one library call per primitive operator, each its own spawn, nothing "
                        "fused across operators, a new operator composed from its torch twin's primitives, every "
                        "kernel at the log's best schedule for it")


def _model(spec: str, batch: int, width: float | None, image: int) -> tuple[Any, tuple[Any, ...]]:
    if ":" in spec and spec.split(":", 1)[0].endswith(".py"):
        from tuner.expr.workload import load_function

        module, inputs = load_function(spec)(batch=batch)
        return module.train(), tuple(inputs)
    from tuner.models.trainable import build_trainable

    return build_trainable(spec, batch, width, image)


def _onnx_step(path: Path, batch: int | None, ranks: int, loss: Any, opt: Any) -> tuple[Any, int]:
    """The training step of an ONNX model (tuner.ir.onnx_training) and the global batch: the file's
    batch is one rank's."""
    from tuner.ir.graph import AotError
    from tuner.ir.onnx_training import onnx_training_step

    if not path.is_file():
        raise CommandError(f"no ONNX file {path}")
    try:
        step = onnx_training_step(path, loss, opt, data_parallel=ranks > 1)
    except AotError as exc:
        raise CommandError(str(exc)) from None
    if len(step.inputs) != 2:
        raise CommandError(f"{path} has {len(step.inputs) - 1} inputs: training data holds one (x)")
    local = step.inputs[0][1][0]
    if batch is not None and batch != local * ranks:
        raise CommandError(f"--batch {batch}: {path} takes batches of {local} per rank, so the batch is "
                           f"{local * ranks} with {ranks} rank(s)")
    return step, local * ranks


def train(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="the program's directory")],
    loss: Annotated[str, typer.Option(help="cross-entropy or mse")] = "cross-entropy",
    optimizer: Annotated[str, typer.Option(help="sgd, momentum or adam")] = "sgd",
    lr: Annotated[float, typer.Option(help="learning rate")] = 0.01,
    batch: Annotated[int | None, typer.Option(min=1, help=f"batch size (default {DEFAULT_BATCH}; an ONNX model's "
                                                           "is its file's, times --ranks)")] = None,
    steps: Annotated[int, typer.Option(min=1, help="training steps to run")] = 5,
    data: Annotated[Path | None, typer.Option(help="an .npz file with arrays x [N, ...] and y (labels [N] for "
                                                   "cross-entropy, targets for mse)")] = None,
    seed: Annotated[int, typer.Option(help="seed of the synthetic data set (without --data)")] = 0,
    dropout_seed: Annotated[int, typer.Option(help="seed of the dropout masks the program draws")] = 0,
    synthetic_batches: Annotated[int, typer.Option(min=1, help="batches of the synthetic set")] = 4,
    width: Annotated[float | None, typer.Option(help="width multiplier of a built-in model")] = None,
    image: Annotated[int, typer.Option(help="input image side of a built-in image model")] = 32,
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    trials: Annotated[int, typer.Option(min=0, help=(
        "trials per GEMM-like task of the step: by default the step is tuned with this budget before it is "
        "compiled; 0 skips tuning (compile reads what the log already holds, and an operator without a record "
        "runs a near record or its baseline on the CPEs)"))] = DEFAULT_TRIALS,
    workers: Annotated[int, typer.Option(help="simulator workers of the embedded service")] = 2,
    db: Annotated[str | None, typer.Option(envvar="SWTUNE_DATABASE_URL", help=DB_HELP)] = None,
    checkpoint_every: Annotated[int, typer.Option(min=0, help="write a checkpoint every K steps (0: none)")] = 0,
    ranks: Annotated[int, typer.Option(min=1, help="MPI ranks (one per core group), each a slice of the batch; "
                                                   "the gradients are averaged with MPI_Allreduce")] = 1,
    run: Annotated[bool, typer.Option(help="build with `make emu` and run the steps on the emulator")] = True,
    overlap: Annotated[bool, typer.Option(help=(
        "start training at once with the kernels the log holds while an embedded service tunes the step "
        "(--trials per task); switch to a rebuilt program at a checkpoint (--checkpoint-every, default 2) "
        "whenever the log's schedules make the step at least 5% faster"))] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help=VERBOSE_HELP)] = False,
    framework_style: Annotated[bool, typer.Option("--framework-style", help=FRAMEWORK_STYLE_HELP)] = False,
) -> None:
    """Train a model on Sunway: one compiled training step (forward, backward, update), tuned,
    checkpointed, run for --steps steps on the emulator.

    By default the step's tasks are tuned first, --trials per task (default 8) on an embedded service
    writing --db; --trials 0 compiles at once from what the log holds; --overlap starts training at once
    and tunes beside it."""
    from cli.model_report import whole_model_report
    from cli.schedule_lookup import db_lookup
    from tuner.ir.expr_layer import decomposed
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.targets import get_target
    from tuner.train import data as train_data
    from tuner.train.program import compile_training, phase_seconds, run_emulated, split_state

    tname = get_target(target).name
    try:
        loss_kind, opt_kind = Loss(loss), OptimizerKind(optimizer)
    except ValueError as exc:
        raise CommandError(f"{exc}: --loss is one of {[l.value for l in Loss]}, --optimizer one of "
                           f"{[o.value for o in OptimizerKind]}") from None
    opt = Optimizer(opt_kind, lr)
    url = database_url(db)
    if overlap and (not trials or ranks > 1 or not run):
        raise CommandError("--overlap tunes while training: give --trials, one rank, and do not pass --no-run")
    if overlap and framework_style:
        raise CommandError("--framework-style is a reference program: it is tuned first, not beside training")
    if model.endswith(".onnx"):
        step, batch = _onnx_step(Path(model), batch, ranks, loss_kind, opt)
        in_shape, out_shape = ((batch, *shape[1:]) for shape in (step.inputs[0][1], step.inputs[-1][1]))
    else:
        batch = batch or DEFAULT_BATCH
        if batch % ranks:
            raise CommandError(f"--batch {batch} does not split over {ranks} ranks")
        module, inputs = _model(model, batch, width, image)
        out_shape = target_shape(module, inputs, loss_kind)
        in_shape = tuple(inputs[0].shape)
        local = tuple(x[:batch // ranks] for x in inputs)  # one rank's slice (the whole batch with one rank)
        with decomposed() if framework_style else nullcontext():  # new operators: their twins' primitives
            step = training_step(module, local, loss_kind, opt, data_parallel=ranks > 1)
    batches = (train_data.from_npz(data, batch, in_shape, out_shape, loss_kind) if data is not None
               else train_data.synthetic(seed, synthetic_batches, batch, in_shape, out_shape, loss_kind))
    name = Path(model.split(":")[0]).stem
    console.print(f"[bold]{model}[/]: training step of {len(step.params)} parameters "
                  f"({sum(v.size for _, v in step.params)} values), {loss_kind.value} loss, {opt_kind.value} "
                  f"(lr {lr:g}), batch {batch}; {len(batches)} batches of data")
    if overlap:
        out.mkdir(parents=True, exist_ok=True)
        batches.tofile(out / "data.bin", step.dtype)
        return _overlapped(step, name, tname, out, steps, checkpoint_every or 2, trials, workers, url,
                           dropout_seed)
    if trials:
        tune_step(step, name, tname, trials, workers, url, db, verbose, fused=not framework_style)
    lookup, close = db_lookup(url, tname)
    try:
        program = compile_training(step, tname, out, lookup, name, dropout_seed, framework_style)
    finally:
        close()
    whole_model_report(program.timing, f"{name} training step" + (" (framework-style)" if framework_style else ""),
                       tname)
    _phase_table(phase_seconds(program.timing, step))
    _scaling_table(program.timing.tuned_s, step, ranks)
    if not run:
        console.print(f"program in {out}: `make emu` builds it; {program.out_dir / 'training.json'} says how to run it")
        return
    batches.tofile(out / "data.bin", step.dtype)
    from tuner.train.program import build_emulated

    build_emulated(out, mpi=ranks > 1)
    start = time.monotonic()
    result = run_emulated(out, out / "data.bin", steps, step.dtype, ranks=ranks if ranks > 1 else 0,
                          checkpoint=out / "checkpoint.bin" if checkpoint_every else None, every=checkpoint_every)
    if result.resumed_from is not None:
        console.print(f"resumed from the checkpoint at step {result.resumed_from}")
    (out / "losses.txt").write_text("".join(f"{i} {v:.9e}\n" for i, v in enumerate(result.losses)))
    state = split_state(result.state, step)
    where = f"the emulator ({ranks} MPI ranks)" if ranks > 1 else "the emulator"
    console.print(f"ran {steps} steps on {where} in {time.monotonic() - start:.1f} s: loss "
                  + " ".join(f"{v:.5f}" for v in result.losses)
                  + f" (losses.txt; final parameters and optimizer state in final_state.bin, {len(state)} tensors)")


def per_round(trials: int) -> int:
    """Trials a task of the step is granted at a time: half of ``trials``, so every task's warm-up takes
    about half the budget and the server's task scheduler (service/budget.py) grants the other half by
    the tasks' shares of the step time (call count x best time so far)."""
    from service.budget import MIN_TRIALS_PER_TASK

    return max(MIN_TRIALS_PER_TASK, trials // 2)


def tune_step(step: Any, name: str, target: str, trials: int, workers: int, url: str, db: str | None,
              verbose: bool = False, fused: bool = True) -> None:
    """Every task of the step as one submission to an embedded service writing the log at ``url``
    (``verbose``: every task in the tuning table; ``fused``: the tasks of swtune's program, else of the
    framework-style one, whose kernels take no epilogue)."""
    from cli.tuner_commands import tune_on_service
    from service.embedded import embedded_service
    from tuner.bridge.extract import extract_relax, trial_budget

    layers = extract_relax(step.module, fused=fused).layers
    budget = trial_budget(layers, trials)
    console.print(f"tuning {len(layers)} tasks of the step (forward and backward), one budget of {budget} trials "
                  f"spread by each task's share of the step time; tuning log {url}")
    with embedded_service(url, workers=workers, target=target) as service:
        tune_on_service(service.url, None, f"{name}-train", layers, target, budget, None, 3600.0,
                        per_round=per_round(trials), verbose=verbose)


def _phase_table(phases: dict[str, dict[str, float]]) -> None:
    total = sum(p["tuned_s"] for p in phases.values()) or 1.0
    table = Table(title="simulated time of one step by phase")
    for col in ("phase", "tuned ms", "share", "baseline ms"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for phase, p in phases.items():
        table.add_row(phase, f"{p['tuned_s'] * 1e3:.3f}", f"{p['tuned_s'] / total:.1%}", f"{p['baseline_s'] * 1e3:.3f}")
    console.print(table)


def _scaling_table(step_s: float, step: Any, ranks: int) -> None:
    """Simulated data-parallel scaling of this step from one core group to 1024 nodes."""
    import numpy as np

    from tuner.train.scaling import scaling

    grad_bytes = sum(v.size for _, v in step.params) * np.dtype(step.dtype).itemsize
    # the step at one rank's batch; with --ranks it already includes a one-process allreduce (a copy)
    table = Table(title=f"simulated data-parallel scaling ({grad_bytes / 1e6:.2f} MB of gradients per step; "
                        "network figures in tuner/train/scaling.py)")
    for col in ("core groups", "weak: step ms", "efficiency", "strong: step ms", "efficiency"):
        table.add_column(col, justify="right")
    for p in scaling(step_s, grad_bytes, [1, 4, 64, 256, 1024, 4096]):
        table.add_row(str(p.cgs), f"{p.weak_step_s * 1e3:.3f}", f"{p.weak_efficiency:.1%}",
                      f"{p.strong_step_s * 1e3:.4f}", f"{p.strong_efficiency:.1%}")
    console.print(table)


def _overlapped(step: Any, name: str, target: str, out: Path, steps: int, every: int, trials: int, workers: int,
                url: str, dropout_seed: int) -> None:
    """Train while an embedded service tunes the step's tasks (tuner.train.overlap), and report."""
    from cli.schedule_lookup import db_lookup
    from service.embedded import embedded_service
    from tuner.bridge.extract import extract_relax

    layers = extract_relax(step.module).layers
    with embedded_service(url, workers=workers, target=target) as service:
        lookup, close = db_lookup(url, target)
        try:
            result = _overlapped_run(step, name, target, out, steps, every, trials, layers, service.url, lookup,
                                     dropout_seed)
        finally:
            close()
    _overlap_report(result, name, out, steps)


def _overlapped_run(step: Any, name: str, target: str, out: Path, steps: int, every: int, trials: int,
                    layers: list[Any], service_url: str, lookup: Any, dropout_seed: int) -> Any:
    from service.client import ServiceClient
    from tuner.aot.lookup import TuningLog
    from tuner.bridge.extract import trial_budget
    from tuner.train.overlap import train_overlapped

    def snapshot() -> Any:
        """The log's schedules for the step's tasks now (a program is built from one moment's log)."""
        found = {l.workload.key: lookup(l.workload) for l in layers}
        return TuningLog(lambda w: found.get(w.key))

    first = snapshot()  # before tuning starts: training starts with what the log already held
    with ServiceClient(service_url, None) as client:
        client.submit_model(f"{name}-train"[:128], [{"name": l.name, "workload": l.workload.to_json(),
                                                      "calls": l.weight} for l in layers],
                            target, trial_budget(layers, trials), per_round=per_round(trials))
    console.print(f"tuning {len(layers)} tasks of the step in the background; training starts now, switching "
                  f"programs at checkpoints every {every} steps")
    return train_overlapped(
        step, target, out, out / "data.bin", steps, every, snapshot, name=name, dropout_seed=dropout_seed,
        first_lookup=first,
        on_chunk=lambda c: console.print(f"steps {c.steps[0]}-{c.steps[-1]} on program v{c.version} (simulated "
                                         f"step {c.simulated_step_s * 1e3:.3f} ms), wall {c.wall_end_s:.1f} s")
        if c.steps else None)


def _overlap_report(result: Any, name: str, out: Path, steps: int) -> None:
    from tuner.train.overlap import plot

    table = Table(title="training overlapped with tuning")
    for col in ("steps", "program", "simulated step ms", "wall s"):
        table.add_column(col, justify="right")
    for c in result.chunks:
        table.add_row(f"{c.steps[0]}-{c.steps[-1]}" if c.steps else "-", f"v{c.version}",
                      f"{c.simulated_step_s * 1e3:.3f}", f"{c.wall_start_s:.1f}-{c.wall_end_s:.1f}")
    console.print(table)
    plot(result, out / "overlap.png", f"{name}: simulated step against wall-clock time")
    assert result.losses is not None
    (out / "losses.txt").write_text("".join(f"{i} {v:.9e}\n" for i, v in enumerate(result.losses)))
    (out / "overlap.json").write_text(json.dumps({
        "steps": steps, "switches": result.switches, "steps_lost": result.steps_lost(steps),
        "steps_repeated": result.steps_repeated(),
        "chunks": [{"program": c.version, "first_step": c.steps[0] if c.steps else None,
                    "last_step": c.steps[-1] if c.steps else None, "simulated_step_ms": c.simulated_step_s * 1e3,
                    "wall_s": [c.wall_start_s, c.wall_end_s]} for c in result.chunks]}, indent=1))
    console.print(f"{steps} steps, {result.switches} program switches, {result.steps_lost(steps)} steps lost, "
                  f"{result.steps_repeated()} repeated; losses.txt, overlap.png, overlap.json in {out}")
