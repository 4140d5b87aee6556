"""A kind of task that only the tests register: AXPY (``y = a * x + y`` over ``n`` elements) streamed
through the CPEs in blocks, with its own workload, space, simulated time, baseline and strategy.

It shows that a new kind is this one module plus one registration line (``register(KIND)``; a
kind of another package declares the same in its pyproject.toml's ``swtune.kinds`` entry points): nothing else in
swtune learns about it, yet parsing, ``space_for``, the simulator backend, the baseline, in-process
tuning and the service's driver all handle it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tuner.errors import InvalidConfigError, InvalidWorkloadError, UnsupportedStrategyError
from tuner.measure.base import MeasureResult, Source, Status
from tuner.measure.simulator import dma_time
from tuner.search.base import SearchStrategy
from tuner.search.registry import create_strategy
from tuner.space.knobs import Knob, KnobSpace
from tuner.targets import Target, get_target
from tuner.task_kind import Factors
from tuner.workloads import DTYPE_BYTES, Workload

OP = "test_axpy"
BLOCKS = (16, 64, 256, 1024, 4096, 16384, 65536)  # elements per DMA block
ACTIVE = (1, 4, 16, 64)  # CPEs that take blocks


@dataclass(frozen=True)
class Axpy(Workload):
    op: ClassVar[str] = OP
    n: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or not 0 < self.n <= 1 << 24:
            raise InvalidWorkloadError(f"n must be an integer in [1, 2^24], got {self.n!r}")
        if self.dtype not in DTYPE_BYTES:
            raise InvalidWorkloadError(f"unsupported dtype {self.dtype!r}")

    @property
    def flops(self) -> int:
        return 2 * self.n


@dataclass
class _Valid:
    valid: np.ndarray


class AxpySpace(KnobSpace):
    """Knobs ``block`` and ``active``; a block of x and y (in and out) must fit the LDM budget."""

    def __init__(self, workload: Axpy, target: Target | str) -> None:
        self.workload, self.target = workload, get_target(target)
        self._set_knobs([Knob("block", BLOCKS), Knob("active", ACTIVE)])

    def _ldm(self, block: np.ndarray) -> np.ndarray:
        return 2 * block * self.workload.dtype_bytes

    def analyze(self, index: np.ndarray) -> _Valid:
        block = self.codes[0][np.atleast_2d(index)[:, 0]]
        return _Valid(self._ldm(block) <= self.target.ldm_budget_bytes)

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        rng = np.random.default_rng(rng)
        rows = np.stack([rng.integers(0, s, n) for s in self.sizes], axis=1)
        return rows[self.analyze(rows).valid]

    def check(self, config: dict[str, Any]) -> np.ndarray:
        vector = self.encode(config)
        if not self.analyze(vector[None, :]).valid[0]:
            raise InvalidConfigError(f"block {config['block']} overflows the LDM")
        return vector

    def seconds(self, config: dict[str, Any]) -> float:
        """Spawn/join plus the busiest CPE's blocks: two gets and a put each, waited on in turn."""
        block, active = int(config["block"]), int(config["active"])
        block = min(block, self.workload.n)
        per_cpe = math.ceil(math.ceil(self.workload.n / block) / active)
        nbytes = block * self.workload.dtype_bytes
        step = 2 * dma_time(self.target, "get", nbytes, active_cpes=active) + dma_time(
            self.target, "put", nbytes, active_cpes=active)
        return self.target.spawn_join_s + per_cpe * step


class AxpyKind:
    name = "test_axpy"
    ops = (OP,)
    feature_family = "test_axpy"

    def from_json(self, op: str, spec: Mapping[str, Any]) -> Workload:
        unknown = set(spec) - {"n", "dtype"}
        if unknown or "n" not in spec:
            raise InvalidWorkloadError(f"an axpy workload has 'n' and an optional 'dtype'; unknown {sorted(unknown)}")
        return Axpy(**spec)

    def memory_bound(self, workload: Workload) -> bool:
        return True

    def space(self, workload: Workload, target: Target | str,
              restrict: Mapping[str, Sequence[Any]] | None) -> AxpySpace:
        assert isinstance(workload, Axpy)
        return AxpySpace(workload, target)

    def simulate(self, space: AxpySpace, configs: Sequence[dict[str, Any]], factors: Factors,
                 source: Source) -> list[MeasureResult]:
        out = []
        for config in configs:
            config = dict(config)
            try:
                vector = space.encode(config)
            except InvalidConfigError as exc:
                out.append(MeasureResult(config, Status.INVALID_CONFIG, error=str(exc), source=source))
                continue
            if not space.analyze(vector[None, :]).valid[0]:
                out.append(MeasureResult(config, Status.LDM_OVERFLOW, error="block over the LDM", source=source))
                continue
            t = space.seconds(config)
            out.append(MeasureResult(config, Status.OK, times=tuple(t * f for f in factors(config)), source=source))
        return out

    def baseline(self, space: AxpySpace) -> dict[str, Any]:
        return {"block": BLOCKS[0], "active": ACTIVE[-1]}  # fine-grained DMA, as a compiler would

    def baseline_seconds(self, space: AxpySpace, config: dict[str, Any]) -> float | None:
        return space.seconds(config)

    def why_not_applied(self, space: AxpySpace, config: dict[str, Any]) -> str | None:
        try:
            space.check(config)
        except InvalidConfigError as exc:
            return str(exc)
        return None

    def takes_transfer(self, requested: str) -> bool:
        return False

    def runs_strategy(self, requested: str) -> bool:
        return requested == "random"  # a toy: no cost model of its own

    def strategy(self, space: AxpySpace, requested: str, seed: int, base_model: Any = None) -> SearchStrategy:
        if not self.runs_strategy(requested):
            raise UnsupportedStrategyError(f"an axpy task runs random search, not {requested!r}")
        return create_strategy("random", space, seed=seed)  # type: ignore[arg-type]  # a duck-typed space

    def tensor_program(self, workload: Workload) -> Any:
        raise TypeError("axpy has no GEMM tensor program")

    def geometry(self, workload: Workload) -> Any:
        raise TypeError("axpy has no GEMM geometry")

    def emulate(self, backend: Any, space: AxpySpace, config: dict[str, Any]) -> MeasureResult:
        return MeasureResult(config, Status.COMPILE_ERROR, error="axpy has no emulator build",
                             source=Source.EMULATOR)

    def sunway_job(self, workload: Workload, target: Any, config: dict[str, Any], directory: str,
                   build_template: str, run_template: str | None, queue: str) -> Any:
        raise NotImplementedError("axpy has no Sunway build")


KIND = AxpyKind()
