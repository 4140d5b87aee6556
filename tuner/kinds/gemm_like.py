"""What the GEMM-like kinds share: output-stationary kernels over a ScheduleSpace.

Their space is a :class:`tuner.space.space.ScheduleSpace`, simulated in batches by
:func:`tuner.measure.simulator.measure_schedule`; their baseline is the OpenACC-like schedule
(tuner.baseline); they run any registered search strategy (the model-guided one with a transfer base
of other GEMM-like workloads); their kernels are generated as athread C by tuner.codegen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.baseline import openacc_baseline, schedule_seconds
from tuner.codegen.sunway import NodeJob, write_kernel
from tuner.measure.base import MeasureResult, Source
from tuner.measure.simulator import measure_schedule
from tuner.search.base import SearchStrategy
from tuner.search.registry import create_strategy
from tuner.space.space import Config, ScheduleSpace
from tuner.targets import Target
from tuner.task_kind import Factors, check_failure
from tuner.workloads import Workload

FEATURE_FAMILY = "gemm_like"  # tuner.search.features: one column layout for every GEMM-like space


class GemmLikeKind:
    """The shared half of the built-in and expression kinds; subclasses add identity and geometry."""

    name = "gemm_like"
    ops: tuple[str, ...] = ()
    feature_family = FEATURE_FAMILY

    def memory_bound(self, workload: Workload) -> bool:
        return False

    def space(self, workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None) -> ScheduleSpace:
        return ScheduleSpace(workload, target, restrict)

    def simulate(self, space: ScheduleSpace, configs: Sequence[Config], factors: Factors,
                 source: Source) -> list[MeasureResult]:
        return measure_schedule(space, configs, factors, source)

    def baseline(self, space: ScheduleSpace) -> Config:
        return openacc_baseline(space)

    def baseline_seconds(self, space: ScheduleSpace, config: Config) -> float | None:
        return schedule_seconds(space, config)

    def why_not_applied(self, space: ScheduleSpace, config: Config) -> str | None:
        return check_failure(space, config)

    def takes_transfer(self, requested: str) -> bool:
        return requested == "model"  # the model-guided strategy starts from other workloads' model

    def runs_strategy(self, requested: str) -> bool:
        return True  # every registered strategy searches a GEMM-like space

    def strategy(self, space: ScheduleSpace, requested: str, seed: int, base_model: Any = None) -> SearchStrategy:
        options = {"base_model": base_model} if base_model is not None else {}
        return create_strategy(requested, space, seed=seed, **options)

    def emulate(self, backend: EmulatorBackend, space: ScheduleSpace, config: Config) -> MeasureResult:
        return backend.measure_one(space, config)

    def sunway_job(self, workload: Workload, target: Target, config: Config, directory: str, build_template: str,
                   run_template: str | None, queue: str) -> NodeJob:
        return write_kernel(workload, target, config, directory, build_template=build_template,
                            run_template=run_template, queue=queue)
