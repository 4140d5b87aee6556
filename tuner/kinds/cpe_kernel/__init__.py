"""Memory-bound operators run block by block on the CPEs (op ``cpe_kernel``) as a kind of task.

Softmax, layer_norm, gelu, mean, padded pools and the other generic operators the compiler cuts into
blocks. The workload is the TVMScript of a one-operator Relax module (tuner.space.cpe.workload); the
space (cut, block, db, active, simd) is analysed whole into tables (tuner.space.cpe.space), a config is
timed on its own legalized body (tuner.kinds.cpe_kernel.measure); the baseline is the compiler's
untuned choice; the search is the kind's own XGBoost residual model over the analysis
(tuner.kinds.cpe_kernel.search) for "model", random sampling for "random", and any other strategy is
refused; on the emulator the one-operator program is compiled ahead of time at the config
(tuner.kinds.cpe_kernel.emulate). It is not a GEMM: no tensor program of the athread codegen, no Sunway
kernel build (its Sunway path is the compiled program; not written yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.errors import InvalidConfigError, UnsupportedStrategyError
from tuner.kinds.cpe_kernel.emulate import measure_on_emulator
from tuner.kinds.cpe_kernel.measure import measure_kernel
from tuner.kinds.cpe_kernel.search import CpeKernelSearch
from tuner.measure.base import MeasureResult, Source
from tuner.search.base import RandomSearch, SearchStrategy
from tuner.space.cpe.space import CpeKernelSpace
from tuner.space.cpe.workload import CpeKernelWorkload
from tuner.space.space import Config
from tuner.targets import Target
from tuner.task_kind import Factors, check_failure
from tuner.workloads import Workload

STRATEGIES = ("model", "random")  # the search strategies a cpe_kernel task runs


class CpeKernelKind:
    name = "cpe_kernel"
    ops = (CpeKernelWorkload.op,)
    feature_family = "cpe_kernel"  # CpeKernelSpace.features: its own columns

    def from_json(self, op: str, spec: Mapping[str, Any]) -> Workload:
        return CpeKernelWorkload.from_json({"op": op, **spec})

    def memory_bound(self, workload: Workload) -> bool:
        return True

    def space(self, workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None) -> CpeKernelSpace:
        assert isinstance(workload, CpeKernelWorkload)
        if restrict:
            raise InvalidConfigError("a cpe_kernel space takes no restriction")
        return CpeKernelSpace(workload, target)

    def simulate(self, space: CpeKernelSpace, configs: Sequence[Config], factors: Factors,
                 source: Source) -> list[MeasureResult]:
        return measure_kernel(space, configs, factors, source)

    def baseline(self, space: CpeKernelSpace) -> Config:
        """What the baseline program runs for it: the compiler's untuned choice."""
        try:
            return space.default_config()
        except InvalidConfigError as exc:
            raise RuntimeError(str(exc)) from None

    def baseline_seconds(self, space: CpeKernelSpace, config: Config) -> float | None:
        exact = space.exact_seconds(config)
        return exact[0] if exact is not None else None

    def why_not_applied(self, space: CpeKernelSpace, config: Config) -> str | None:
        """The space's rules; the compiler re-checks the config's meaning on the model's own node
        (tuner.space.cpe.task.tuned_op), whose constants the rebuilt operator does not have."""
        return check_failure(space, config)

    def takes_transfer(self, requested: str) -> bool:
        return False

    def runs_strategy(self, requested: str) -> bool:
        return requested in STRATEGIES

    def strategy(self, space: CpeKernelSpace, requested: str, seed: int, base_model: Any = None) -> SearchStrategy:
        """"model": its own model-guided search (tuner.kinds.cpe_kernel.search); "random": uniform
        sampling of its valid configs."""
        if requested == "model":
            return CpeKernelSearch(space, seed=seed)
        if requested == "random":
            return RandomSearch(space, seed=seed)  # type: ignore[arg-type]  # samples any KnobSpace
        raise UnsupportedStrategyError(f"a cpe_kernel task runs the search strategies {list(STRATEGIES)}, "
                                       f"not {requested!r}")

    def tensor_program(self, workload: Workload) -> Any:
        raise TypeError(f"{workload.key} is a memory-bound CPE kernel: it has no GEMM tensor program")

    def geometry(self, workload: Workload) -> Any:
        raise TypeError(f"{workload.key} is a memory-bound CPE kernel: it has no GEMM geometry")

    def emulate(self, backend: EmulatorBackend, space: CpeKernelSpace, config: Config) -> MeasureResult:
        backend.emulator_object()  # no gcc here: an InfrastructureError, not a config's failure
        return backend.guarded(config, lambda: measure_on_emulator(space, config, backend.new_workdir(),
                                                                   backend.timeout_s, backend.seed))

    def sunway_job(self, workload: Workload, target: Target, config: Config, directory: str, build_template: str,
                   run_template: str | None, queue: str) -> Any:
        raise NotImplementedError("a cpe_kernel task has no Sunway kernel build yet; measure it on the simulator "
                                  "or the emulator")


KIND = CpeKernelKind()
