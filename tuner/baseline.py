"""The OpenACC-like baseline schedule a tuned kernel is compared against (the swTVM paper's baseline).

OpenACC on Sunway splits one outer loop over the 64 CPEs and lets the compiler move data with
fine-grained DMA: no 2-D mesh mapping, no tile sharing, per-row requests, no double buffering, scalar
code. We give it the benefit of hand tuning: the programmer picks which output loop to parallelize
(the row axes -- batch/spatial -- or the col axis -- output features/channels -- one element per
CPE step) and the best tile sizes and loop orders under those restrictions, found by enumerating
that small sub-space. On a target of several core groups (tuner/space/chip.py) it splits that same
outer loop over all of them too, as OpenACC would (falling back to one CG where the loop has fewer
iterations than CGs), so a speedup over it compares the same number of CGs.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any

import numpy as np

from tuner.measure.simulator import simulate
from tuner.profile import DEFAULT_VERSION, Profile
from tuner.space.choices import Acc, CgOperands, CgSplit, Dma, Share
from tuner.space.factory import space_for
from tuner.space.space import Config, ScheduleSpace
from tuner.task_kind import kind_of
from tuner.workloads import Workload

FIXED = dict(share=Share.NONE.label, dma=Dma.ROWS.label, put_lines=0, db_a=0, db_b=0, simd=1, unroll=1,
             acc=Acc.LDM.label)
PARALLEL = {"64x1": "row", "1x64": "col"}  # grid -> the axes split element-wise over the CPEs


def baseline_config(space: Any) -> Config:
    """The config a tuned one is compared with, as the space's kind defines it (the OpenACC-like
    schedule of a GEMM-like kernel; a memory-bound CPE kernel's untuned choice). RuntimeError when the
    space has none."""
    return kind_of(space.workload).baseline(space)


def _chip_splits(space: ScheduleSpace, parallel_role: str) -> list[dict[str, Any]]:
    """The parallel loop over every core group, or one CG (no chip knobs on a one-CG target)."""
    if "cgs" not in space.knob_index:
        return [{}]
    split = CgSplit.ROWS if parallel_role == "row" else CgSplit.COLS
    return [{}, {"cgs": space.target.cgs, "cg_split": split.label, "cg_operands": CgOperands.REPLICATE.label}]


def openacc_baseline(space: ScheduleSpace) -> Config:
    """The fastest config (by the simulator) of a GEMM-like schedule space with the OpenACC restrictions."""
    rows = []
    for grid, parallel_role in PARALLEL.items():
        choices: list[tuple[str, tuple]] = []
        for axis in space.geometry.axes:
            # the parallel loop: one element at a time per CPE; the others: any tile size
            choices.append((f"tile_{axis.name}", (1,) if axis.role == parallel_role else axis.choices))
        choices.append(("tile_order", space.knobs[space.knob_index["tile_order"]].choices))
        choices.append(("inner", space.knobs[space.knob_index["inner"]].choices))
        names = [n for n, _ in choices]
        for combo, split in itertools.product(itertools.product(*(c for _, c in choices)), _chip_splits(space,
                                                                                                         parallel_role)):
            rows.append(space.encode({**FIXED, "grid": grid, **dict(zip(names, combo)), **split}))
    index = np.stack(rows)
    times = simulate(space, index)
    if not np.isfinite(times).any():
        raise RuntimeError(f"no valid OpenACC-like schedule for {space.workload.key}")
    return space.decode(index[int(np.argmin(times))])


def baseline_time(workload: Workload, target: str, profile: Profile | None = None) -> float | None:
    """Simulated seconds of one call under the OpenACC-like schedule: what `swtune demo`, tune-model,
    a model submission's budget and the dashboard compare against. ``profile``: the simulator profile a
    tuned time it is compared with came from (None or the built-in one: the target's own costs), so a
    speedup never measures the difference between two profiles. None when the space has no valid
    OpenACC-like schedule."""
    if profile is None or profile.version == DEFAULT_VERSION:
        return _builtin_baseline_time(workload, target)
    return _baseline_seconds(workload, space_for(workload, profile.apply(target)))  # the space's target has its costs


@lru_cache(maxsize=4096)
def _builtin_baseline_time(workload: Workload, target: str) -> float | None:
    return _baseline_seconds(workload, space_for(workload, target))


def _baseline_seconds(workload: Workload, space: Any) -> float | None:
    kind = kind_of(workload)
    try:
        config = kind.baseline(space)
    except RuntimeError:
        return None
    return kind.baseline_seconds(space, config)


def schedule_seconds(space: ScheduleSpace, config: Config) -> float | None:
    """Noise-free simulated seconds of one config of a GEMM-like space (None when it is invalid)."""
    t = float(simulate(space, space.encode(config)[None, :])[0])
    return t if math.isfinite(t) and t > 0 else None
