"""Generated athread C of an expression operator, checked on the emulator: ``swtune check-op``'s core.

For random valid configs of an :class:`~tuner.space.expr_space.ExprSpace`, each config is generated (TVM
schedule -> lowered TIR -> slave + host C), built against swemu and run on random inputs
(tuner/backends/emulator_backend.py); its output is compared with TVM's llvm run of the same
expression (tuner/codegen/reference.py), the emulator's DMA counters with the analysis' totals, and
the DMA figures of the lowered TIR (tuner/codegen/tir_check.py) with the analysis. Nothing is
skipped silently: a config that fails to generate or build counts as a compile failure, with its
error kept among the problems.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# measurement statuses (tuner.measure.base; compared as their string values)
OK, COMPILE_ERROR, WRONG_RESULT = "ok", "compile_error", "wrong_result"


@dataclass
class EmulatorSummary:
    configs_checked: int = 0
    wrong_results: int = 0
    dma_count_mismatches: int = 0  # emulator DMA counters vs the analysis
    tir_mismatches: int = 0  # DMA/LDM figures of the lowered TIR vs the analysis
    compile_failures: int = 0
    runtime_errors: int = 0
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"configs_checked": self.configs_checked, "wrong_results": self.wrong_results,
                "dma_count_mismatches": self.dma_count_mismatches, "tir_mismatches": self.tir_mismatches,
                "compile_failures": self.compile_failures, "runtime_errors": self.runtime_errors,
                "problems": self.problems[:10]}


def check_config(space: Any, config: dict[str, Any], backend: Any, summary: EmulatorSummary) -> None:
    """Generate, build and run one config; add its outcome to ``summary``."""
    from tuner.codegen.schedule import build_schedule
    from tuner.codegen.tir_check import compare_with_analysis

    result = backend.measure_one(space, config)
    summary.configs_checked += 1
    status = result.status
    if status == COMPILE_ERROR:
        summary.compile_failures += 1
    elif status == WRONG_RESULT:
        summary.wrong_results += 1
    elif status != OK:
        summary.runtime_errors += 1
    if status != OK:
        summary.problems.append(f"{config}: {status}: {(result.error or '')[-400:]}")
    if status in (OK, WRONG_RESULT) and not result.details.get("dma_match", False):
        summary.dma_count_mismatches += 1
        summary.problems.append(f"{config}: emulator DMA {result.details.get('dma')} vs analysis "
                                f"{result.details.get('dma_expected')}")
    if status != COMPILE_ERROR:
        mismatch = compare_with_analysis(build_schedule(space.workload, space.target, config))
        if mismatch:
            summary.tir_mismatches += 1
            summary.problems.append(f"{config}: TIR vs analysis {mismatch}")


def emulator_check(space: Any, n_configs: int, seed: int = 0, workdir: str | None = None,
                   timeout_s: float = 60.0, discrete_inputs: bool = False) -> EmulatorSummary:
    """Check ``n_configs`` random valid configs of ``space`` on the emulator (fewer only if the space
    has fewer valid configs); ``discrete_inputs`` for a body that compares operands for equality
    (tuner.backends.emulator_backend.random_inputs)."""
    from tuner.backends.emulator_backend import EmulatorBackend

    summary = EmulatorSummary()
    rows = space.sample(n_configs, np.random.default_rng(seed))
    with tempfile.TemporaryDirectory(prefix="swtune_check_") as tmp:
        backend = EmulatorBackend(workdir=workdir or tmp, timeout_s=timeout_s, seed=seed,
                                  discrete_inputs=discrete_inputs)
        backend.emulator_object()  # built once, before the first config
        for row in rows:
            check_config(space, space.decode(row), backend, summary)
    return summary
