"""Exhaustive neighbourhoods of configs: every valid config one knob-change away (vectorised).

The model-guided search uses it for its local step around measured incumbents, and the benchmark's
reference hill-climb for steepest descent. ``ScheduleSpace.neighbours`` draws *random* moves; this
lists *all* single-knob moves, which is what a local search needs to be sure an incumbent is a local
optimum of the model; ``best_moves`` takes one steepest-ascent step of many rows at once.
"""

from __future__ import annotations

import numpy as np

from tuner.space.space import ScheduleSpace


def single_knob_moves(space: ScheduleSpace, rows: np.ndarray, valid_only: bool = True) -> np.ndarray:
    """Every config that differs from one of ``rows`` in exactly one knob (duplicates removed)."""
    out, _ = moves_with_parents(space, rows, valid_only)
    return np.unique(out, axis=0) if len(out) else out


def moves_with_parents(space: ScheduleSpace, rows: np.ndarray,
                       valid_only: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Every single-knob move of every row, with the index of the row it came from (not deduplicated)."""
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
    parent = np.repeat(np.arange(len(rows)), len(knob))[changed]
    out = out[changed]
    if valid_only and len(out):
        ok = space.is_valid(out)
        out, parent = out[ok], parent[ok]
    return out, parent


def best_moves(rows: np.ndarray, scores: np.ndarray, moves: np.ndarray, parents: np.ndarray,
               move_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row replaced by its best-scoring move when that scores higher (steepest ascent, one step)."""
    rows, scores = rows.copy(), scores.copy()
    if len(moves) == 0:
        return rows, scores
    order = np.lexsort((-move_scores, parents))  # per parent, best move first
    first = order[np.r_[True, parents[order][1:] != parents[order][:-1]]]
    better = move_scores[first] > scores[parents[first]]
    take = first[better]
    rows[parents[take]] = moves[take]
    scores[parents[take]] = move_scores[take]
    return rows, scores
