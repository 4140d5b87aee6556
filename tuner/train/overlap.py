"""Training overlapped with tuning (NeoFlow's runtime): train at once with the kernels the tuning log
holds, and switch to a rebuilt program whenever the log holds enough better schedules.

The program runs in chunks of ``every`` steps, each ending with a checkpoint (tuner.aot.training_program:
a program resumes from the checkpoint file and stops after a given step). At each chunk boundary the
runner takes the tuning log's schedules (``lookup_now()``, the caller's snapshot of an embedded
service's or a server's log, tuning the step's tasks meanwhile) and, in a background thread while the
next chunk trains, times the step with them; when that is at least ``min_gain`` faster than every
program built so far, the thread compiles and builds a new program, and the first chunk boundary
after it is ready switches to it.
The new program resumes from the same checkpoint: its fingerprint hashes the carried state, not the
kernels, so no step is lost or run twice (the runner counts each step's ``SWTUNE_LOSS`` line).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tuner.aot.compiler import lower_model
from tuner.aot.lookup import Lookup
from tuner.ir.training import TrainingStep
from tuner.targets import Target
from tuner.train.program import TrainingRunError, build_emulated, compile_training, run_emulated


@dataclass(frozen=True)
class Chunk:
    version: int  # the program that ran it (0: the first)
    steps: list[int]  # the steps it ran, from their SWTUNE_LOSS lines
    simulated_step_s: float  # that program's simulated step
    wall_start_s: float  # since training started
    wall_end_s: float


@dataclass
class OverlapRun:
    chunks: list[Chunk] = field(default_factory=list)
    versions: list[float] = field(default_factory=list)  # simulated step seconds of each program built
    losses: np.ndarray | None = None
    state: np.ndarray | None = None

    @property
    def switches(self) -> int:
        return len({c.version for c in self.chunks}) - 1

    def steps_run(self) -> list[int]:
        return [s for c in self.chunks for s in c.steps]

    def steps_lost(self, steps: int) -> int:
        return len(set(range(steps)) - set(self.steps_run()))

    def steps_repeated(self) -> int:
        run = self.steps_run()
        return len(run) - len(set(run))


class _Builder:
    """One background build at a time: compile + ``make emu`` of a program version."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.ready: tuple[int, Path, float] | None = None
        self.error: BaseException | None = None

    def start(self, build: Callable[[], tuple[int, Path, float] | None]) -> None:
        def run() -> None:
            try:
                self.ready = build()
            except BaseException as exc:  # noqa: BLE001 -- handed to the training loop, which re-raises
                self.error = exc

        self.thread = threading.Thread(target=run, name="swtune-rebuild", daemon=True)
        self.thread.start()

    @property
    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def train_overlapped(step: TrainingStep, target: Target | str, out_dir: Path, data: Path, steps: int, every: int,
                     lookup_now: Callable[[], Lookup], *, name: str = "model", dropout_seed: int = 0,
                     min_gain: float = 0.05, on_chunk: Callable[[Chunk], Any] | None = None,
                     wait_for_build_s: float = 0.0, first_lookup: Lookup | None = None) -> OverlapRun:
    """Train ``steps`` steps over ``data``, switching programs at checkpoints as the tuning log improves.
    ``wait_for_build_s``: at a checkpoint, wait up to this long for a build in progress (0, NeoFlow's
    way: never; tests wait so that the switch lands at a known checkpoint). ``first_lookup``: the
    schedules of the first program (default ``lookup_now()``; a caller that starts tuning just before
    passes the log as it was, so training starts with what was there)."""
    if every <= 0:
        raise ValueError("training overlapped with tuning switches programs at checkpoints: give every > 0")
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = out_dir / "checkpoint.bin"
    result = OverlapRun()

    def build(version: int, lookup: Lookup) -> tuple[int, Path, float]:
        where = out_dir / f"v{version}"
        program = compile_training(step, target, where, lookup, name, dropout_seed)
        build_emulated(where)
        return version, where, program.timing.tuned_s

    version, current, current_s = build(0, first_lookup if first_lookup is not None else lookup_now())
    result.versions.append(current_s)

    def consider(lookup: Lookup) -> tuple[int, Path, float] | None:
        """In the background: time the step with ``lookup``'s schedules; build it if it gains enough."""
        candidate = lower_model(step.module, target, lookup).timing().tuned_s
        if candidate > min(result.versions) * (1 - min_gain):  # not better than every program built so far
            return None
        result.versions.append(candidate)
        return build(len(result.versions) - 1, lookup)

    builder = _Builder()
    start = time.monotonic()
    for first in range(0, steps, every):
        if builder.busy and wait_for_build_s > 0 and builder.thread is not None:
            builder.thread.join(wait_for_build_s)
        if builder.error is not None:
            raise TrainingRunError(f"rebuilding the program failed: {builder.error}") from builder.error
        if builder.ready is not None:  # switch at this checkpoint
            version, current, current_s = builder.ready
            builder.ready = None
        elif first > 0 and not builder.busy:  # training never waits for this: it runs beside the chunk
            builder.start(functools.partial(consider, lookup_now()))
        last = min(first + every, steps)
        t0 = time.monotonic() - start
        run = run_emulated(current, data, last, step.dtype, checkpoint=checkpoint, every=every)
        ran = [int(line.split()[1]) for line in run.stdout.splitlines() if line.startswith("SWTUNE_LOSS ")]
        chunk = Chunk(version, ran, current_s, t0, time.monotonic() - start)
        result.chunks.append(chunk)
        result.losses, result.state = run.losses, run.state
        if on_chunk is not None:
            on_chunk(chunk)
    # training is done; a build still running is waited for (not used): the process must not exit while
    # the thread is inside TVM's C++ (its teardown would abort with std::terminate)
    if builder.thread is not None:
        builder.thread.join()
    return result


def plot(run: OverlapRun, path: Path, title: str) -> None:
    """Simulated step time against wall-clock time, one segment per chunk (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for c in run.chunks:
        ax.plot([c.wall_start_s, c.wall_end_s], [c.simulated_step_s * 1e3] * 2, color=f"C{c.version % 10}", lw=3)
    for c, nxt in zip(run.chunks, run.chunks[1:]):
        if nxt.version != c.version:
            ax.axvline(nxt.wall_start_s, color="grey", ls=":", lw=1)
    ax.set_xlabel("wall-clock seconds since training started")
    ax.set_ylabel("simulated step (ms)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
