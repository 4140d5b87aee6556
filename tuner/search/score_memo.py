"""Memoised cost-model scores of a space's configs, valid while the model does not change.

One round of the model-guided search scores tens of thousands of configs (the evolution's
generations, the climb's single-knob moves, the local moves), and a third to a half of them are
configs it has already scored: a child equal to a parent, the same neighbour reached from two
starts, the climb's unmoved starts. Their features (the schedule analysis) cost more than the
model's prediction, and a row's score depends on that row alone, so a memo returns the same scores
for less: the search proposes exactly what it would without one.

Rows are keyed by their mixed-radix number in the knob product (one int64 per row, vectorised
lookups by binary search in a sorted array). A space whose product does not fit in an int64 is
scored without a memo; a memo past ``max_rows`` starts over, which bounds the memory of a driver
that holds one per active task.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tuner.space.knobs import KnobSpace


class ScoreMemo:
    """Scores by config row; :meth:`clear` whenever the model's predictions change."""

    def __init__(self, space: KnobSpace, max_rows: int = 200_000) -> None:
        sizes = [int(s) for s in space.sizes]
        total = 1
        for s in sizes:
            total *= s
        # row r's key: sum_j r[j] * prod(sizes[j+1:]); None when the product would overflow an int64
        self._radix = (np.array([int(np.prod(sizes[j + 1:], dtype=object)) for j in range(len(sizes))], dtype=np.int64)
                       if total < 2**62 else None)
        self.max_rows = max_rows
        self.clear()

    def clear(self) -> None:
        self._keys = np.empty(0, dtype=np.int64)  # sorted
        self._scores = np.empty(0, dtype=np.float64)

    def __len__(self) -> int:
        return len(self._keys)

    def scores(self, rows: np.ndarray, score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``score(rows)``, computing it only for rows not in the memo (each distinct row once)."""
        if self._radix is None or len(rows) == 0:
            return np.asarray(score(rows), dtype=np.float64)
        keys = np.asarray(rows, dtype=np.int64) @ self._radix
        out = np.empty(len(rows), dtype=np.float64)
        hit = np.zeros(len(rows), dtype=bool)
        if len(self._keys):
            pos = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
            hit = self._keys[pos] == keys
            out[hit] = self._scores[pos[hit]]
        miss = np.flatnonzero(~hit)
        if len(miss):
            new_keys, first, inverse = np.unique(keys[miss], return_index=True, return_inverse=True)
            new_scores = np.asarray(score(rows[miss[first]]), dtype=np.float64)
            out[miss] = new_scores[inverse.reshape(-1)]
            self._remember(new_keys, new_scores)
        return out

    def _remember(self, keys: np.ndarray, scores: np.ndarray) -> None:
        if len(self._keys) + len(keys) > self.max_rows:
            self.clear()
        # ``keys`` are sorted (np.unique) and none is in the memo: one merge, no sort of the whole memo
        at = np.searchsorted(self._keys, keys)
        self._keys, self._scores = np.insert(self._keys, at, keys), np.insert(self._scores, at, scores)
