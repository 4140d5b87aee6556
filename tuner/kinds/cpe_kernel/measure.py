"""Simulated measurements of a memory-bound CPE kernel (the cpe_kernel kind's simulated time).

A configuration is timed on its own legalized body (``CpeKernelSpace.exact_seconds``: the DMA model
and the body's counts at the Target's CPE costs, tuner.space.cpe.schedule), with the simulator's noise
per repeat. Invalid configurations are results (failures as data), never exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tuner.errors import InvalidConfigError
from tuner.measure.base import MeasureResult, Source, Status
from tuner.space.cpe.schedule import Why
from tuner.space.cpe.space import CpeKernelSpace
from tuner.space.space import Config


def measure_kernel(space: CpeKernelSpace, configs: Sequence[Config], factors: Callable[[Config], Any],
                   source: Source) -> list[MeasureResult]:
    """One result per config: ``factors(config)`` gives the noise of its repeats."""
    out: list[MeasureResult] = []
    budget = space.target.ldm_budget_bytes
    for config in configs:
        config = dict(config)
        try:
            vector = space.encode(config)
        except InvalidConfigError as exc:
            out.append(MeasureResult(config=config, status=Status.INVALID_CONFIG, error=str(exc), source=source))
            continue
        a = space.analyze(vector[None, :])
        exact = space.exact_seconds(config) if a.valid[0] else None
        if exact is None:
            why = a.why(0) if not a.valid[0] else space.why_not(config).value
            status = Status.LDM_OVERFLOW if why == Why.LDM.value else Status.INVALID_CONFIG
            out.append(MeasureResult(config=config, status=status, source=source,
                                     error=f"{why}: LDM {int(a.ldm_total[0])} B, budget {budget} B"))
            continue
        seconds, ldm = exact
        times = tuple(float(seconds * f) for f in factors(config))
        out.append(MeasureResult(config=config, status=Status.OK, times=times, source=source,
                                 details={"model_seconds": seconds, "ldm_bytes": ldm}))
    return out
