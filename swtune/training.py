"""Training a model on Sunway (``train``): one compiled training step (forward, loss, backward,
update: tuner.ir.training), tuned (``tune_step``), checkpointed, run on the emulator.

TVM and torch are imported inside the functions.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from swtune.errors import ArgumentError
from swtune.progress import Progress
from swtune.results import CompiledStep, ServiceTuning, StepInfo, Training
from swtune.tuning import trials_per_round, tune_layers
from swtune.tuning_log import database_url, db_lookup

DEFAULT_BATCH = 8
# Without trials, train tunes the step with this budget first (not overlap): a first run then reports a
# tuned step, and trials=0 is the explicit "no tuning" (issue #46)
DEFAULT_TRIALS = 8
SCALING_CGS = (1, 4, 64, 256, 1024, 4096)  # the core groups the step's data-parallel scaling is simulated at


def tune_step(step: Any, db: str | None, *, name: str, target: str = "sw26010", trials: int = DEFAULT_TRIALS,
              workers: int = 2, fused: bool = True, timeout: float = 3600.0,
              progress: Progress | None = None) -> ServiceTuning:
    """Tune every task of a training step (a ``tuner.ir.training.TrainingStep``) as one submission,
    ``trials`` per GEMM-like task, on an embedded service writing the tuning log ``db`` (``tune_layers``:
    half of each task's trials a grant, the rest by its share of the step). ``fused``: the tasks of
    swtune's program, else of the framework-style one, whose kernels take no epilogue. Returns the
    ``ServiceTuning`` of the submission (its tasks as they ended, the best record of each workload).
    Raises ``ValueError`` for a ``db`` that names no tuning log, ``ArgumentError`` for ``trials`` < 1."""
    from tuner.bridge.extract import extract_relax

    layers = extract_relax(step.module, fused=fused, target=target).layers
    return tune_layers(layers, db, name=f"{name}-train", target=target, trials=trials, workers=workers,
                       timeout=timeout, progress=progress)


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
        raise ArgumentError(f"no ONNX file {path}")
    try:
        step = onnx_training_step(path, loss, opt, data_parallel=ranks > 1)
    except AotError as exc:
        raise ArgumentError(str(exc)) from None
    if len(step.inputs) != 2:
        raise ArgumentError(f"{path} has {len(step.inputs) - 1} inputs: training data holds one (x)")
    local = step.inputs[0][1][0]
    if batch is not None and batch != local * ranks:
        raise ArgumentError(f"batch {batch}: {path} takes batches of {local} per rank, so the batch is "
                            f"{local * ranks} with {ranks} rank(s)")
    return step, local * ranks


def _enum(kind: Any, value: Any, what: str) -> Any:
    try:
        return kind(value)
    except ValueError as exc:
        raise ArgumentError(f"{exc}: {what} is one of {[k.value for k in kind]}") from None


def train(model: str, out: str | Path, *, loss: str = "cross-entropy", optimizer: str = "sgd", lr: float = 0.01,
          batch: int | None = None, steps: int = 5, data: str | Path | None = None, seed: int = 0,
          dropout_seed: int = 0, synthetic_batches: int = 4, width: float | None = None, image: int = 32,
          target: str = "sw26010", trials: int = DEFAULT_TRIALS, workers: int = 2, db: str | None = None,
          checkpoint_every: int = 0, ranks: int = 1, run: bool = True, overlap: bool = False,
          framework_style: bool = False, progress: Progress | None = None) -> Training:
    """Compile a model's training step for Sunway into ``out``, tuned, and run it for ``steps`` steps on
    the emulator.

    ``model``: mlp, cnn, resnet18_small, transformer, a zoo model, ``FILE.py:FUNC`` returning (torch
    module, example inputs), or ``FILE.onnx`` (its batch norms frozen; its batch is one rank's). ``loss``:
    cross-entropy or mse; ``optimizer``: sgd, momentum or adam, at learning rate ``lr``. The data: an .npz
    file ``data`` with arrays x [N, ...] and y (labels for cross-entropy, targets for mse), else
    ``synthetic_batches`` batches drawn with ``seed``; ``batch`` default 8. ``ranks`` > 1: MPI ranks,
    each a slice of the batch, gradients averaged by MPI_Allreduce.

    The step's tasks are first tuned, ``trials`` per GEMM-like task, on an embedded service with
    ``workers`` simulator workers writing the tuning log ``db`` (a path or a URL; None: ``./swtune.db``);
    ``trials=0`` compiles from what the log holds. ``overlap``: train at once with what the log holds
    while the step tunes, switching to a rebuilt program at a checkpoint (every ``checkpoint_every``,
    default 2) whenever the log makes the step at least 5% faster. ``framework_style``: the reference
    program (one library call per primitive operator). ``run=False``: write the program, do not build or
    run it. A checkpoint is written every ``checkpoint_every`` steps (0: none), and a run resumes from it.

    Writes the program, data.bin, losses.txt (and with ``overlap`` overlap.png and overlap.json) in
    ``out``. Returns a ``Training``. Raises ``ArgumentError`` for a combination that cannot run (overlap
    without trials, with ranks or without running, or with framework_style; a batch that does not split
    over the ranks; an unknown loss or optimizer), ``ValueError`` for bad data, a bad learning rate or a
    bad ``db``, ``tuner.train.program.TrainingRunError`` when the program fails to build or run."""
    from tuner.ir.expr_layer import decomposed
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.targets import get_target
    from tuner.train import data as train_data

    progress = progress or Progress()
    out = Path(out)
    tname = get_target(target).name
    loss_kind, opt_kind = _enum(Loss, loss, "loss"), _enum(OptimizerKind, optimizer, "optimizer")
    opt = Optimizer(opt_kind, lr)
    url = database_url(db)
    if overlap and (not trials or ranks > 1 or not run):
        raise ArgumentError("overlap tunes while training: give trials, one rank, and run")
    if overlap and framework_style:
        raise ArgumentError("framework_style is a reference program: it is tuned first, not beside training")
    if model.endswith(".onnx"):
        step, batch = _onnx_step(Path(model), batch, ranks, loss_kind, opt)
        in_shape, out_shape = ((batch, *shape[1:]) for shape in (step.inputs[0][1], step.inputs[-1][1]))
    else:
        batch = batch or DEFAULT_BATCH
        if batch % ranks:
            raise ArgumentError(f"batch {batch} does not split over {ranks} ranks")
        module, inputs = _model(model, batch, width, image)
        out_shape = target_shape(module, inputs, loss_kind)
        in_shape = tuple(inputs[0].shape)
        local = tuple(x[:batch // ranks] for x in inputs)  # one rank's slice (the whole batch with one rank)
        with decomposed() if framework_style else nullcontext():  # new operators: their twins' primitives
            step = training_step(module, local, loss_kind, opt, data_parallel=ranks > 1)
    batches = (train_data.from_npz(Path(data), batch, in_shape, out_shape, loss_kind) if data is not None
               else train_data.synthetic(seed, synthetic_batches, batch, in_shape, out_shape, loss_kind))
    name = Path(model.split(":")[0]).stem
    info = StepInfo(model, len(step.params), sum(v.size for _, v in step.params), loss_kind.value, opt_kind.value,
                    lr, batch, len(batches))
    progress.step_built(info)
    if overlap:
        out.mkdir(parents=True, exist_ok=True)
        batches.tofile(out / "data.bin", step.dtype)
        result = _overlapped(step, name, tname, out, steps, checkpoint_every or 2, trials, workers, url,
                             dropout_seed, progress)
        return Training(info, out, steps, overlap=result)
    if trials:
        tune_step(step, url, name=name, target=tname, trials=trials, workers=workers, fused=not framework_style,
                  progress=progress)
    compiled = _compile(step, name, tname, out, url, dropout_seed, framework_style, progress)
    progress.step_compiled(compiled)
    if not run:
        return Training(info, out, steps, ranks, compiled)
    return _run(step, batches, out, steps, ranks, checkpoint_every, info, compiled)


def _compile(step: Any, name: str, target: str, out: Path, url: str, dropout_seed: int, framework_style: bool,
             progress: Progress) -> CompiledStep:
    """The step's program in ``out`` with the log's schedules, timed by phase, its scaling simulated."""
    import numpy as np

    from tuner.train.program import compile_training, phase_seconds
    from tuner.train.scaling import scaling

    lookup, close = db_lookup(url, target, progress)
    try:
        program = compile_training(step, target, out, lookup, name, dropout_seed, framework_style)
    finally:
        close()
    timing = program.timing
    grad_bytes = int(sum(v.size for _, v in step.params) * np.dtype(step.dtype).itemsize)
    # the step at one rank's batch; with ranks > 1 it already includes a one-process allreduce (a copy)
    points = scaling(timing.tuned_s, grad_bytes, list(SCALING_CGS))
    return CompiledStep(name, target, Path(program.out_dir), timing, phase_seconds(timing, step), grad_bytes, points,
                        framework_style)


def _run(step: Any, batches: Any, out: Path, steps: int, ranks: int, checkpoint_every: int, info: StepInfo,
         compiled: CompiledStep) -> Training:
    """Build the program for the emulator and run ``steps`` steps; the losses go to losses.txt."""
    from tuner.train.program import build_emulated, run_emulated, split_state

    batches.tofile(out / "data.bin", step.dtype)
    build_emulated(out, mpi=ranks > 1)
    start = time.monotonic()
    result = run_emulated(out, out / "data.bin", steps, step.dtype, ranks=ranks if ranks > 1 else 0,
                          checkpoint=out / "checkpoint.bin" if checkpoint_every else None, every=checkpoint_every)
    seconds = time.monotonic() - start
    (out / "losses.txt").write_text("".join(f"{i} {v:.9e}\n" for i, v in enumerate(result.losses)))
    state = split_state(result.state, step)
    return Training(info, out, steps, ranks, compiled, True, result.losses, result.resumed_from, seconds, len(state))


def _overlapped(step: Any, name: str, target: str, out: Path, steps: int, every: int, trials: int, workers: int,
                url: str, dropout_seed: int, progress: Progress) -> Any:
    """Train while an embedded service tunes the step's tasks (tuner.train.overlap); the losses, a plot
    and overlap.json go to ``out``."""
    from service.client import ServiceClient
    from service.embedded import embedded_service
    from tuner.aot.lookup import TuningLog
    from tuner.bridge.extract import extract_relax, trial_budget
    from tuner.train.overlap import plot, train_overlapped

    layers = extract_relax(step.module, target=target).layers
    with embedded_service(url, workers=workers, target=target) as service:
        lookup, close = db_lookup(url, target, progress)
        try:
            def snapshot() -> Any:
                """The log's schedules for the step's tasks now (a program is built from one moment's log)."""
                found = {l.workload.key: lookup(l.workload) for l in layers}
                return TuningLog(lambda w: found.get(w.key))

            first = snapshot()  # before tuning starts: training starts with what the log already held
            with ServiceClient(service.url, None) as client:
                client.submit_model(f"{name}-train"[:128], [{"name": l.name, "workload": l.workload.to_json(),
                                                              "calls": l.weight} for l in layers],
                                    target, trial_budget(layers, trials), per_round=trials_per_round(trials))
            progress.overlap_started(len(layers), every)
            result = train_overlapped(step, target, out, out / "data.bin", steps, every, snapshot, name=name,
                                      dropout_seed=dropout_seed, first_lookup=first, on_chunk=progress.overlap_chunk)
        finally:
            close()
    plot(result, out / "overlap.png", f"{name}: simulated step against wall-clock time")
    assert result.losses is not None
    (out / "losses.txt").write_text("".join(f"{i} {v:.9e}\n" for i, v in enumerate(result.losses)))
    (out / "overlap.json").write_text(json.dumps({
        "steps": steps, "switches": result.switches, "steps_lost": result.steps_lost(steps),
        "steps_repeated": result.steps_repeated(),
        "chunks": [{"program": c.version, "first_step": c.steps[0] if c.steps else None,
                    "last_step": c.steps[-1] if c.steps else None, "simulated_step_ms": c.simulated_step_s * 1e3,
                    "wall_s": [c.wall_start_s, c.wall_end_s]} for c in result.chunks]}, indent=1))
    return result
