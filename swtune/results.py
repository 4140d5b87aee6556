"""What the workflows return: one dataclass each, read by the command line's reports and the benchmarks.

Times are seconds; a result keeps the domain objects it was made from (the program's timing, the
profile, the tuner's check results) for a caller that wants more than its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.targets import get_target
from tuner.task_kind import kind_of
from tuner.train.scaling import ScalingPoint


@dataclass(frozen=True)
class TuningPlan:
    """The tasks about to be tuned as one submission with one trial ``budget``. ``log_url``: the tuning
    log an embedded service writes (None on a running server); ``untuned_ops``: the model's operators no
    task covers (legalized: CPE kernels, or C on the MPE), with their counts."""

    name: str
    layers: list[Any]
    budget: int
    log_url: str | None
    untuned_ops: Mapping[str, int] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        """Calls of the tasks in one run of the model (a task used twice counts twice)."""
        return sum(layer.weight for layer in self.layers)

    @property
    def memory_bound(self) -> int:
        """How many of the tasks are memory-bound (their kind says: element-wise operators, CPE kernels)."""
        return sum(1 for layer in self.layers if kind_of(layer.workload).memory_bound(layer.workload))


@dataclass(frozen=True)
class ServiceTuning:
    """A submission as it ended: its ``tasks`` (the API's documents, in the order of the layers given)
    and the ``best`` record of each workload key the log holds (``mean_time``, ``config``, ...)."""

    tasks: list[dict[str, Any]]
    best: dict[str, dict[str, Any]]

    def config(self, workload: Any) -> dict[str, Any] | None:
        """The best config of ``workload``, or None (untuned): a lookup for the compiler."""
        found = self.best.get(workload.key)
        return found.get("config") if found else None


@dataclass(frozen=True)
class LayerResult:
    """One task of a tuned model: its baseline (the OpenACC-like schedule) and best time, each one call."""

    name: str
    workload: Any
    calls: int
    trials: int
    baseline_s: float
    tuned_s: float | None  # None: untuned (no successful measurement)
    config: dict[str, Any] | None
    interval: tuple[float, float] | None = None  # the tuned config's 95% interval under the profile
    core_groups: str | None = None  # how the tuned config uses the chip (a chip target only)

    @property
    def speedup(self) -> float | None:
        return self.baseline_s / self.tuned_s if self.tuned_s else None


def has_draws(profile: Any) -> bool:
    """Whether a simulator profile (None: the built-in one) has fit draws, which give each time an interval."""
    return profile is not None and bool(profile.fit.get("draws"))


@dataclass(frozen=True)
class ModelTuning:
    """``tune_model``'s result: per layer, and the whole program ``compile_model`` would build from the log.

    ``timing``: the program's simulated time by operator (tuner.aot.timing.ModelTime); ``profile``: the
    log's active simulator profile behind the times (None: the built-in one); ``interval``: the whole
    program's 95% interval under it."""

    model: str
    target: str
    plan: TuningPlan
    layers: list[LayerResult]
    elapsed_s: float
    timing: Any
    profile: Any = None
    interval: tuple[float, float] | None = None

    @property
    def with_intervals(self) -> bool:
        """The profile has fit draws, so each tuned layer has a 95% interval."""
        return has_draws(self.profile)

    @property
    def chip(self) -> bool:
        """The target splits kernels over several core groups (each layer says how it uses them)."""
        return get_target(self.target).cgs > 1

    @property
    def untuned(self) -> list[str]:
        """The layers without a successful measurement (counted at their baseline)."""
        return [layer.name for layer in self.layers if not layer.tuned_s]

    @property
    def baseline_s(self) -> float:
        """The tuned operators' total time at their baselines, weighted by calls."""
        return sum(layer.calls * layer.baseline_s for layer in self.layers)

    @property
    def tuned_s(self) -> float:
        """The tuned operators' total time, weighted by calls (an untuned one at its baseline)."""
        return sum(layer.calls * (layer.tuned_s or layer.baseline_s) for layer in self.layers)


@dataclass(frozen=True)
class Compiled:
    """``compile_model``'s result: the program (a ``tuner.aot.compiler.AotResult``: the files, what each
    binding became, the simulated timing), the profile behind its times and the whole program's interval."""

    program: Any
    profile: Any = None
    interval: tuple[float, float] | None = None

    @property
    def out_dir(self) -> Path:
        return Path(self.program.out_dir)

    @property
    def files(self) -> list[str]:
        return list(self.program.files)

    @property
    def timing(self) -> Any:
        """The simulated end-to-end time by operator (tuner.aot.timing.ModelTime; ``summary()`` for totals)."""
        return self.program.timing


@dataclass(frozen=True)
class StepInfo:
    """``train``'s step as built: its parameters and their values, the loss, the optimizer and the data."""

    model: str
    params: int
    values: int
    loss: str
    optimizer: str
    lr: float
    batch: int
    batches: int


@dataclass(frozen=True)
class CompiledStep:
    """``train``'s compiled step: its simulated timing (tuner.aot.timing.ModelTime), the time by phase
    (forward, backward, update: ``tuned_s`` and ``baseline_s`` each) and its data-parallel scaling."""

    name: str
    target: str
    out_dir: Path
    timing: Any
    phases: dict[str, dict[str, float]]
    gradient_bytes: int
    scaling: list[ScalingPoint]
    framework_style: bool = False


@dataclass(frozen=True)
class Training:
    """``train``'s result. ``compiled``: the step's program (None with ``overlap``, whose programs are
    rebuilt as tuning goes); ``ran``: the steps ran on the emulator; ``losses``: one per step;
    ``overlap``: the run overlapped with tuning (a ``tuner.train.overlap.OverlapRun``)."""

    step: StepInfo
    out_dir: Path
    steps: int
    ranks: int = 1
    compiled: CompiledStep | None = None
    ran: bool = False
    losses: Any = None
    resumed_from: int | None = None
    seconds: float = 0.0
    state_tensors: int = 0
    overlap: Any = None


@dataclass(frozen=True)
class Calibration:
    """``calibrate``'s result: the fitted ``profile`` (with its version if stored), the fit's summary
    (records, in-sample and cross-validated errors), the measured code's own costs, where it was stored,
    whether it is active, and the FACTS figures it breaks."""

    profile: Any
    summary: dict[str, Any]
    code_terms: Mapping[str, Mapping[str, Any]]
    stored: bool
    active: bool
    url: str
    breaks: list[str]

    @property
    def document(self) -> dict[str, Any]:
        """The profile as JSON (what ``tuner.profile.Profile.from_json`` reads)."""
        return dict(self.profile.to_json())


@dataclass(frozen=True)
class OpCheck:
    """``check_op``'s result: the emulator check of random configs (generated C against TVM's run, DMA
    counts against the analysis) and the tile check (each tile from the boxes its schedule fetches)."""

    workload_key: str
    emulator: Any
    tiles: Any

    @property
    def problems(self) -> list[str]:
        return [*self.emulator.problems, *self.tiles.problems]

    @property
    def failed(self) -> bool:
        emu, tiles = self.emulator, self.tiles
        return bool(emu.wrong_results or emu.dma_count_mismatches or emu.tir_mismatches or emu.compile_failures
                    or emu.runtime_errors or tiles.wrong_results or tiles.dma_count_mismatches)

    def as_json(self) -> dict[str, Any]:
        return {"workload": self.workload_key, "check": "emulator", **self.emulator.as_json(),
                "tile_check": self.tiles.as_json()}
