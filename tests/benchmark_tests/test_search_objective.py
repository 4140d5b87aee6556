"""The search benchmark's objective and trial log: free repeats and invalid proposals, the hidden
mismatch factor, noise that follows the simulator's default, incumbents scored on true time."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from objective import FACTOR_RANGE, HIDDEN_KNOBS, NOISE, Objective, TrialLog, Variant, mismatch_factor  # noqa: E402

from tuner.measure.noise import DEFAULT_NOISE  # noqa: E402
from tuner.measure.simulator import simulate  # noqa: E402
from tuner.space import ScheduleSpace  # noqa: E402
from tuner.workloads import Dense  # noqa: E402


@pytest.fixture(scope="module")
def space():
    return ScheduleSpace(Dense(64, 256, 256, "float32"), "sw26010")


def test_noise_is_the_simulators_default_and_reproducible(space):
    assert NOISE == DEFAULT_NOISE
    rows = space.sample(400, np.random.default_rng(0))
    obj = Objective(space, seed=3)
    measured, true = obj.measure_and_true(rows)
    np.testing.assert_array_equal(true, simulate(space, rows))
    np.testing.assert_array_equal(measured, Objective(space, seed=3).measure(rows))  # same seed, same figures
    ratio = measured / true
    # a config's repeats share one launch: their mean keeps the launch-to-launch spread
    assert np.std(np.log(ratio)) == pytest.approx(DEFAULT_NOISE, rel=0.2) and not np.allclose(ratio, 1.0)
    assert not np.array_equal(measured, Objective(space, seed=4).measure(rows))


def test_mismatch_factor_depends_only_on_hidden_knobs_and_stays_in_range(space):
    rows = space.sample(500, np.random.default_rng(1))
    f = mismatch_factor(space, rows)
    assert f.min() >= FACTOR_RANGE[0] and f.max() <= FACTOR_RANGE[1] and f.std() > 0.05
    cols = [space.knob_index[k] for k in HIDDEN_KNOBS if k in space.knob_index]
    other = [j for j in range(rows.shape[1]) if j not in cols]
    shuffled = rows.copy()
    shuffled[:, other] = rows[np.random.default_rng(2).permutation(len(rows))][:, other]
    np.testing.assert_array_equal(mismatch_factor(space, shuffled), f)
    perturbed = Objective(space, Variant.PERTURBED, noise=0.0).true(rows)
    np.testing.assert_allclose(perturbed, simulate(space, rows) * f)


def test_repeats_and_invalid_configs_cost_no_trial(space):
    rows = space.sample(10, np.random.default_rng(5))
    bad = np.array(space.sizes) - 1  # largest value of every knob: overflows the LDM
    assert not space.is_valid(bad[None, :])[0]
    log = TrialLog(Objective(space, seed=0), cap=100)
    first = log.evaluate(rows[:6])
    again = log.evaluate(np.concatenate([rows[:3], bad[None, :], rows[6:]]))
    assert len(log.curve) == 10 and log.repeats == 3 and log.invalid == 1
    np.testing.assert_array_equal(again[:3], first[:3])
    assert np.isinf(again[3])


def test_curve_follows_the_true_time_of_the_measured_incumbent(space):
    rows = space.sample(300, np.random.default_rng(6))
    obj = Objective(space, seed=1, noise=0.3)  # loud noise: the measured best is often not the truly best
    log = TrialLog(obj, cap=300)
    log.evaluate(rows)
    measured, true = obj.measure_and_true(rows)
    assert log.curve[-1] == true[np.argmin(measured)]
    assert log.best_true_seen == true.min() <= log.curve[-1]
    assert len(log.curve) == 300


def test_log_stops_counting_at_the_cap_and_at_the_goal(space):
    rows = space.sample(50, np.random.default_rng(7))
    log = TrialLog(Objective(space, noise=0.0), cap=20)
    log.evaluate(rows)
    assert len(log.curve) == 20 and log.done
    true = simulate(space, rows)
    goal = np.sort(true)[10]
    log = TrialLog(Objective(space, noise=0.0), cap=50, goal=goal)
    for row in rows:
        log.evaluate(row[None, :])
        if log.done:
            break
    assert log.curve[-1] <= goal and len(log.curve) == int(np.argmax(np.minimum.accumulate(true) <= goal)) + 1
