"""Exhaustive neighbourhoods of configs: every valid config one knob-change away (vectorised).

The model-guided search uses it for its local step around measured incumbents, and the benchmark's
reference hill-climb for steepest descent. ``ScheduleSpace.neighbours`` draws *random* moves; this
lists *all* single-knob moves, which is what a local search needs to be sure an incumbent is a local
optimum of the model.
"""

from __future__ import annotations

import numpy as np

from tuner.space.space import ScheduleSpace


def single_knob_moves(space: ScheduleSpace, rows: np.ndarray, valid_only: bool = True) -> np.ndarray:
    """Every config that differs from one of ``rows`` in exactly one knob (duplicates removed)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    sizes = np.asarray(space.sizes)
    # one (knob, value) pair per possible move, applied to every row
    knob = np.concatenate([np.full(int(s), j) for j, s in enumerate(sizes) if s > 1]) if (sizes > 1).any() \
        else np.empty(0, dtype=np.int64)
    value = np.concatenate([np.arange(int(s)) for s in sizes if s > 1]) if len(knob) else knob
    out = np.repeat(rows, len(knob), axis=0)
    moves = np.tile(np.arange(len(knob)), len(rows))
    out[np.arange(len(out)), knob[moves]] = value[moves]
    changed = (out != np.repeat(rows, len(knob), axis=0)).any(axis=1)
    out = out[changed]
    if len(out) == 0:
        return out
    out = np.unique(out, axis=0)
    if valid_only:
        out = out[space.is_valid(out)]
    return out
