"""Transfer's rows of other workloads' measurements: the same history as encoding and featurising
them directly, each row computed once however many tasks ask for it."""

from __future__ import annotations

import numpy as np

import tuner.search.transfer as transfer
from tuner.search.features import features
from tuner.search.transfer import History, MeasuredRows, base_model
from tuner.space import ScheduleSpace
from tuner.workloads import Dense


def _measured(space: ScheduleSpace, n: int, seed: int) -> list[tuple[dict, float]]:
    rows = space.sample(n, np.random.default_rng(seed))
    return [(space.decode(r), float(i + 1)) for i, r in enumerate(rows)]


def test_a_history_from_the_memo_is_the_direct_one_and_rows_are_featurised_once(monkeypatch):
    space = ScheduleSpace(Dense(4, 256, 128, "float32"), "sw26010")
    measured = _measured(space, 40, seed=0)
    calls: list[int] = []

    def counting(s, index):
        calls.append(len(index))
        return features(s, index)

    monkeypatch.setattr(transfer, "features", counting)
    memo = MeasuredRows()
    history = memo.history("dense", space, measured)
    direct = History(space, np.stack([space.encode(c) for c, _ in measured]), np.array([t for _, t in measured]))
    assert np.array_equal(history.index, direct.index) and np.array_equal(history.seconds, direct.seconds)
    assert np.array_equal(history.feature_rows(), features(space, direct.index))
    calls.clear()
    more = measured[:10] + _measured(space, 5, seed=1)
    again = memo.history("dense", space, more)
    assert calls == [len({tuple(space.encode(c)) for c, _ in more[10:]} - {tuple(r) for r in direct.index})]
    assert np.array_equal(again.seconds, [t for _, t in more])


def test_configs_the_space_rejects_are_left_out_and_a_history_of_none_is_none():
    space = ScheduleSpace(Dense(4, 256, 128, "float32"), "sw26010")
    measured = _measured(space, 3, seed=2)
    foreign = [({"no_such_knob": 1}, 9.0)]
    memo = MeasuredRows()
    history = memo.history("dense", space, measured + foreign)
    assert len(history.seconds) == 3 and 9.0 not in history.seconds
    assert memo.history("dense", space, foreign) is None


def test_the_base_model_is_the_same_from_memo_rows_and_from_direct_features():
    spaces = [ScheduleSpace(Dense(4, n, 128, "float32"), "sw26010") for n in (256, 512)]
    memo = MeasuredRows()
    rng = np.random.default_rng(3)
    memoed, direct = [], []
    for k, space in enumerate(spaces):
        rows = space.sample(30, rng)
        measured = [(space.decode(r), float(rng.uniform(1, 2))) for r in rows]
        memoed.append(memo.history(k, space, measured))
        direct.append(History(space, rows, np.array([t for _, t in measured])))
    probe = features(spaces[0], spaces[0].sample(50, rng))
    assert np.allclose(base_model(memoed).predict(probe), base_model(direct).predict(probe))
