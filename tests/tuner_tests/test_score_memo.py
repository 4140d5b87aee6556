"""The search's memo of model scores: the same scores as scoring directly, each distinct row scored once."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tuner.search.score_memo import ScoreMemo


def _Space(sizes):
    """What the memo reads of a space: its knobs' sizes."""
    return SimpleNamespace(sizes=np.array(sizes, dtype=np.int64))


def _counting_score():
    calls = []

    def score(rows):
        calls.append(len(rows))
        return rows @ np.arange(1, rows.shape[1] + 1) + 0.5 * rows[:, 0] ** 2

    return score, calls


def test_memo_scores_equal_direct_scores_and_each_distinct_row_is_scored_once():
    rng = np.random.default_rng(0)
    memo = ScoreMemo(_Space([5, 7, 3, 4]))
    score, calls = _counting_score()
    first = rng.integers(0, [5, 7, 3, 4], size=(300, 4))
    assert np.array_equal(memo.scores(first, score), score(first))
    calls.clear()
    second = np.concatenate([first[:50], rng.integers(0, [5, 7, 3, 4], size=(100, 4))])
    assert np.array_equal(memo.scores(second, score), score(second))
    fresh = {tuple(r) for r in second[50:]} - {tuple(r) for r in first}
    assert calls[0] == len(fresh)  # only rows never seen, each once
    assert len(memo) == len({tuple(r) for r in np.concatenate([first, second])})


def test_a_cleared_memo_scores_again_and_a_full_one_starts_over():
    memo = ScoreMemo(_Space([10, 10]), max_rows=20)
    score, calls = _counting_score()
    rows = np.array([[i, j] for i in range(5) for j in range(3)])
    memo.scores(rows, score)
    memo.clear()
    calls.clear()
    memo.scores(rows, score)
    assert calls == [15]
    more = np.array([[i, 9] for i in range(10)])
    assert np.array_equal(memo.scores(more, score), score(more))
    assert len(memo) == 10  # past max_rows: the memo started over with the new rows only


def test_a_product_too_large_for_an_int64_is_scored_without_a_memo():
    memo = ScoreMemo(_Space([2**20] * 4))
    score, calls = _counting_score()
    rows = np.zeros((6, 4), dtype=np.int64)
    assert np.array_equal(memo.scores(rows, score), score(rows))
    assert calls[0] == 6 and len(memo) == 0
