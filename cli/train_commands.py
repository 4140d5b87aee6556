"""``swtune train``: a model, a loss and an optimizer compiled into one training-step program for
Sunway, tuned, and run for N steps on the emulator.

The command parses its options and prints; the workflow is ``swtune.train``: the step (forward, loss,
backward, update: tuner.ir.training) is one Relax function; its tasks are extracted and tuned as one
submission like ``tune-model``'s (``--trials 0`` skips tuning), the program is compiled ahead of time (host
and slave C, Makefile for sw5cc/swgcc and ``make emu``) and, unless ``--no-run``, built for the emulator and
run, writing the losses. The API, TVM and torch are imported inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.model_report import whole_model_report
from cli.output import console
from cli.progress import ConsoleProgress
from cli.tuner_commands import VERBOSE_HELP
from cli.tuning_log import DB_HELP
from swtune.training import DEFAULT_BATCH, DEFAULT_TRIALS

if TYPE_CHECKING:
    from swtune.results import CompiledStep, StepInfo, TuningPlan

MODEL_HELP = ("mlp, cnn, resnet18_small, transformer, a zoo model (resnet18, mobilenet_v2, ...), FILE.py:FUNC "
              "returning (torch module, example inputs), or FILE.onnx (its batch norms frozen)")
FRAMEWORK_STYLE_HELP = ("run the step as a framework on a Sunway operator library does (the reference swtune is "
                        "measured against): one library call per primitive operator, each its own spawn, nothing "
                        "fused across operators, a new operator composed from its torch twin's primitives, every "
                        "kernel at the log's best schedule for it")


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
    import swtune
    from tuner.ir.optimizers import OptimizerKind
    from tuner.ir.training import Loss

    try:  # the options' values, as the API takes them (the API would refuse them naming its arguments)
        Loss(loss), OptimizerKind(optimizer)
    except ValueError as exc:
        raise CommandError(f"{exc}: --loss is one of {[l.value for l in Loss]}, --optimizer one of "
                           f"{[o.value for o in OptimizerKind]}") from None
    if overlap and (not trials or ranks > 1 or not run):
        raise CommandError("--overlap tunes while training: give --trials, one rank, and do not pass --no-run")
    if overlap and framework_style:
        raise CommandError("--framework-style is a reference program: it is tuned first, not beside training")
    result = swtune.train(model, out, loss=loss, optimizer=optimizer, lr=lr, batch=batch, steps=steps, data=data,
                          seed=seed, dropout_seed=dropout_seed, synthetic_batches=synthetic_batches, width=width,
                          image=image, target=target, trials=trials, workers=workers, db=db,
                          checkpoint_every=checkpoint_every, ranks=ranks, run=run, overlap=overlap,
                          framework_style=framework_style, progress=_TrainProgress(verbose))
    if result.overlap is not None:
        return _overlap_report(result.overlap, out, steps)
    if not result.ran:
        assert result.compiled is not None
        console.print(f"program in {out}: `make emu` builds it; {result.compiled.out_dir / 'training.json'} says how "
                      "to run it")
        return
    if result.resumed_from is not None:
        console.print(f"resumed from the checkpoint at step {result.resumed_from}")
    where = f"the emulator ({ranks} MPI ranks)" if ranks > 1 else "the emulator"
    console.print(f"ran {steps} steps on {where} in {result.seconds:.1f} s: loss "
                  + " ".join(f"{v:.5f}" for v in result.losses)
                  + f" (losses.txt; final parameters and optimizer state in final_state.bin, {result.state_tensors} "
                    "tensors)")


class _TrainProgress(ConsoleProgress):
    """``train``'s stages: the step, its tuning, its compiled program's reports, the overlapped run's chunks."""

    def step_built(self, info: StepInfo) -> None:
        console.print(f"[bold]{info.model}[/]: training step of {info.params} parameters ({info.values} values), "
                      f"{info.loss} loss, {info.optimizer} (lr {info.lr:g}), batch {info.batch}; {info.batches} "
                      "batches of data")

    def tuning_planned(self, plan: TuningPlan) -> None:
        console.print(f"tuning {len(plan.layers)} tasks of the step (forward and backward), one budget of "
                      f"{plan.budget} trials spread by each task's share of the step time; tuning log {plan.log_url}")

    def step_compiled(self, compiled: CompiledStep) -> None:
        whole_model_report(compiled.timing, f"{compiled.name} training step"
                           + (" (framework-style)" if compiled.framework_style else ""), compiled.target)
        _phase_table(compiled.phases)
        _scaling_table(compiled)

    def overlap_started(self, tasks: int, every: int) -> None:
        console.print(f"tuning {tasks} tasks of the step in the background; training starts now, switching "
                      f"programs at checkpoints every {every} steps")

    def overlap_chunk(self, chunk: Any) -> None:
        if chunk.steps:
            console.print(f"steps {chunk.steps[0]}-{chunk.steps[-1]} on program v{chunk.version} (simulated step "
                          f"{chunk.simulated_step_s * 1e3:.3f} ms), wall {chunk.wall_end_s:.1f} s")


def _phase_table(phases: dict[str, dict[str, float]]) -> None:
    total = sum(p["tuned_s"] for p in phases.values()) or 1.0
    table = Table(title="simulated time of one step by phase")
    for col in ("phase", "tuned ms", "share", "baseline ms"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for phase, p in phases.items():
        table.add_row(phase, f"{p['tuned_s'] * 1e3:.3f}", f"{p['tuned_s'] / total:.1%}", f"{p['baseline_s'] * 1e3:.3f}")
    console.print(table)


def _scaling_table(compiled: CompiledStep) -> None:
    """Simulated data-parallel scaling of this step from one core group to 1024 nodes."""
    table = Table(title=f"simulated data-parallel scaling ({compiled.gradient_bytes / 1e6:.2f} MB of gradients "
                        "per step; network figures in tuner/train/scaling.py)")
    for col in ("core groups", "weak: step ms", "efficiency", "strong: step ms", "efficiency"):
        table.add_column(col, justify="right")
    for p in compiled.scaling:
        table.add_row(str(p.cgs), f"{p.weak_step_s * 1e3:.3f}", f"{p.weak_efficiency:.1%}",
                      f"{p.strong_step_s * 1e3:.4f}", f"{p.strong_efficiency:.1%}")
    console.print(table)


def _overlap_report(result: Any, out: Path, steps: int) -> None:
    table = Table(title="training overlapped with tuning")
    for col in ("steps", "program", "simulated step ms", "wall s"):
        table.add_column(col, justify="right")
    for c in result.chunks:
        table.add_row(f"{c.steps[0]}-{c.steps[-1]}" if c.steps else "-", f"v{c.version}",
                      f"{c.simulated_step_s * 1e3:.3f}", f"{c.wall_start_s:.1f}-{c.wall_end_s:.1f}")
    console.print(table)
    console.print(f"{steps} steps, {result.switches} program switches, {result.steps_lost(steps)} steps lost, "
                  f"{result.steps_repeated()} repeated; losses.txt, overlap.png, overlap.json in {out}")
