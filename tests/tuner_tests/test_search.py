"""Every search strategy on the simulator: finds the optimum of small spaces, never repeats itself."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.measure.simulator import Simulator, simulate
from tuner.search import create_strategy, strategy_names
from tuner.search.scheduler import GradientScheduler
from tuner.space import ScheduleSpace, config_hash
from tuner.tune import tune_workloads
from tuner.workloads import Conv2d, Dense

SMALL = Dense(64, 64, 64, "float32")
# A real-sized GEMM whose space is cut down until it can be enumerated: tiles and mapping stay free.
SMALL_RESTRICT = dict(grid=["8x8", "4x4", "2x8", "64x1"], put_lines=[0], tile_order=["row"], unroll=[4, 16],
                      db_b=[1], inner=["n", "k"])


@pytest.fixture(scope="module")
def small_space():
    space = ScheduleSpace(SMALL, "sw26010", restrict=SMALL_RESTRICT)
    every = space.enumerate()
    assert every is not None and 100 < len(every) < 1_000_000
    return space, every


@pytest.mark.slow
@pytest.mark.parametrize("name", strategy_names())
def test_strategy_finds_the_optimum_of_a_small_space(name, small_space):
    space, every = small_space
    optimum = simulate(space, every).min()
    search = create_strategy(name, space, seed=0)
    sim = Simulator(noise=0.0)  # exact comparison with the noise-free optimum
    budget = len(every) if name == "random" else 600
    while search.n_measured < budget:
        configs = search.ask(256 if name == "random" else 32)
        if not configs:
            break
        search.tell(configs, sim.measure(SMALL, space.target, configs))
        if search.best_time <= optimum * 1.0000001:
            break
    assert search.best_time == pytest.approx(optimum, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", strategy_names())
def test_strategy_never_proposes_measured_or_in_flight_configs(name):
    space = ScheduleSpace(Conv2d(1, 16, 14, 14, 32, 3, 3, pad_h=1, pad_w=1), "sw26010")
    search = create_strategy(name, space, seed=1)
    sim = Simulator()
    seen: set[str] = set()
    in_flight = search.ask(16)  # never told: must stay excluded
    seen.update(config_hash(c) for c in in_flight)
    for _ in range(6):
        configs = search.ask(24)
        hashes = [config_hash(c) for c in configs]
        assert len(set(hashes)) == len(hashes) and not seen & set(hashes)
        assert space.is_valid(np.stack([space.encode(c) for c in configs])).all()
        seen.update(hashes)
        search.tell(configs, sim.measure(space.workload, space.target, configs))
    assert search.n_measured == 6 * 24


def test_the_baseline_is_queued_once_and_never_proposed_again():
    from tuner.baseline import baseline_config

    space = ScheduleSpace(Dense(4, 256, 128, "float32"), "sw26010")
    search = create_strategy("random", space, seed=0)
    assert search.queue_baseline() == [baseline_config(space)]
    assert search.queue_baseline() == []  # in flight: not queued twice, e.g. after a driver restart
    proposed = {config_hash(c) for c in search.ask(64)}
    assert config_hash(baseline_config(space)) not in proposed


def test_configs_handed_back_are_handed_out_first_and_never_proposed_twice():
    """The driver hands back what it could not queue (the task's room shrank): nothing is lost or repeated."""
    from tuner.baseline import baseline_config

    space = ScheduleSpace(Dense(4, 256, 128, "float32"), "sw26010")
    search = create_strategy("random", space, seed=0)
    search.queue_start()
    handed = search.ask_next(4)
    assert handed[0] == baseline_config(space)
    search.hand_back(handed[1:])
    again = search.ask_next(5)
    assert again[:3] == handed[1:]
    assert len({config_hash(c) for c in handed + again[3:]}) == 6


@pytest.mark.slow
def test_model_guided_beats_random_on_a_big_space():
    space = ScheduleSpace(Conv2d(1, 64, 27, 27, 192, 5, 5, pad_h=2, pad_w=2), "sw26010")
    sim = Simulator()
    best = {}
    for name in ("random", "model"):
        search = create_strategy(name, space, seed=3)
        while search.n_measured < 160:
            configs = search.ask(16)
            search.tell(configs, sim.measure(space.workload, space.target, configs))
        best[name] = search.best_time
    assert best["model"] < best["random"]


def test_restarted_strategy_resumes_without_repeats():
    space = ScheduleSpace(Dense(64, 64, 64, "float32"), "sw26010")
    sim = Simulator()
    first = create_strategy("model", space, seed=0)
    measured = first.ask(40)
    results = sim.measure(space.workload, space.target, measured)
    first.tell(measured, results)
    queued = first.ask(8)
    again = create_strategy("model", space, seed=0)  # a fresh process: told what the log holds
    again.tell(measured, results)
    again.mark_in_flight(queued)
    proposed = {config_hash(c) for c in again.ask(32)}
    assert not proposed & {config_hash(c) for c in measured + queued}


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown search strategy"):
        create_strategy("nope", ScheduleSpace(SMALL, "sw26010"))


def test_scheduler_gives_more_trials_to_the_heavier_task():
    heavy, light = Dense(64, 256, 256, "float32"), Dense(64, 256, 256, "float32")
    results = tune_workloads([heavy, light], "sw26010", trials=400, strategy="random", batch=16,
                             weights=[10.0, 1.0], total_trials=320)
    assert results[0].trials > 1.5 * results[1].trials


def test_scheduler_warms_up_every_task_and_stops_early():
    sched = GradientScheduler([1.0, 1.0], [100, 100], early_stop=20)
    first, second = sched.next_task(), None
    sched.record(first, 10, 1.0)
    second = sched.next_task()
    assert {first, second} == {0, 1}
    sched.record(second, 10, 1.0)
    sched.record(first, 30, 1.0)  # 20 trials with no improvement
    assert sched.tasks[first].stopped and sched.next_task() == second


def test_tune_reports_best_config_and_curve():
    (result,) = tune_workloads([Dense(32, 32, 32, "float32")], "sw26010", trials=48, strategy="model", batch=16)
    assert result.trials == 48 and len(result.curve) == 48
    assert result.curve[-1] == result.best_time and all(np.diff(result.curve) <= 0)
    assert result.gflops > 0 and result.best_config is not None


def test_single_knob_moves_are_every_valid_one_knob_change():
    from tuner.search.neighbourhood import single_knob_moves

    space = ScheduleSpace(SMALL, "sw26010", restrict=SMALL_RESTRICT)
    row = space.sample(1, np.random.default_rng(4))[0]
    expected = set()
    for j, size in enumerate(space.sizes):
        for v in range(size):
            if v != row[j]:
                cand = row.copy()
                cand[j] = v
                if space.is_valid(cand[None, :])[0]:
                    expected.add(cand.tobytes())
    got = single_knob_moves(space, row[None, :])
    assert {r.tobytes() for r in got} == expected and len(got) == len(expected) > 0


@pytest.mark.slow
def test_local_share_goes_to_neighbours_of_the_measured_incumbents():
    from tuner.search.neighbourhood import single_knob_moves

    space = ScheduleSpace(Conv2d(1, 64, 27, 27, 192, 5, 5, pad_h=2, pad_w=2), "sw26010")
    search = create_strategy("model", space, seed=2, local=1.0, epsilon=0.0, local_starts=2, local_pairs=0)
    sim = Simulator(noise=0.0)
    while search.n_measured < 48:
        configs = search.ask(16)
        search.tell(configs, sim.measure(space.workload, space.target, configs))
    times = np.asarray(search.measured_time)
    top = np.stack([search.measured_index[i] for i in np.argsort(times)[:2]])
    around = {r.tobytes() for r in single_knob_moves(space, top)}
    proposed = [space.encode(c) for c in search.ask(8)]
    assert proposed and all(r.tobytes() in around for r in proposed)
    no_local = create_strategy("model", space, seed=2, local=0.0, epsilon=0.0)
    no_local.tell([space.decode(r) for r in search.measured_index],
                  sim.measure(space.workload, space.target, [space.decode(r) for r in search.measured_index]))
    assert sum(space.encode(c).tobytes() in around for c in no_local.ask(8)) < 8


def test_best_moves_climb_to_a_local_optimum_of_the_score():
    from tuner.search.neighbourhood import best_moves, moves_with_parents, single_knob_moves

    space = ScheduleSpace(SMALL, "sw26010", restrict=SMALL_RESTRICT)

    def score(rows):
        return -simulate(space, rows)

    rows = space.sample(6, np.random.default_rng(7))
    scores = score(rows)
    for _ in range(50):
        moves, parents = moves_with_parents(space, rows)
        new_rows, new_scores = best_moves(rows, scores, moves, parents, score(moves))
        assert (new_scores >= scores).all()
        if np.array_equal(new_rows, rows):
            break
        rows, scores = new_rows, new_scores
    for row, s in zip(rows, scores):  # every end point beats each of its single-knob neighbours
        assert s >= score(single_knob_moves(space, row[None, :])).max()


def test_roofline_estimate_ranks_configs_like_the_simulator():
    from tuner.search.features import ESTIMATE_COLUMN, features

    space = ScheduleSpace(Conv2d(1, 64, 27, 27, 192, 5, 5, pad_h=2, pad_w=2), "sw26010")
    rows = space.sample(3000, np.random.default_rng(3))
    est = features(space, rows)[:, ESTIMATE_COLUMN]
    t = simulate(space, rows)
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    assert np.corrcoef(rank(est), rank(t))[0, 1] > 0.8


@pytest.mark.slow
def test_climb_share_is_proposed_and_never_exceeds_the_round():
    space = ScheduleSpace(Conv2d(1, 64, 27, 27, 192, 5, 5, pad_h=2, pad_w=2), "sw26010")
    sim = Simulator(noise=0.0)
    search = create_strategy("model", space, seed=1, local=0.5, climb=1.0, epsilon=0.25)
    for _ in range(3):
        configs = search.ask(8)
        assert len(configs) == 8 and len({config_hash(c) for c in configs}) == 8
        search.tell(configs, sim.measure(space.workload, space.target, configs))
    # with only the climb share, the first proposal is an end point of the climb: a local optimum of the model
    from tuner.search.neighbourhood import single_knob_moves

    climber = create_strategy("model", space, seed=1, local=0.0, climb=1.0, epsilon=0.0, climb_steps=100)
    history = [space.decode(r) for r in search.measured_index]
    climber.tell(history, sim.measure(space.workload, space.target, history))
    first = space.encode(climber.ask(4)[0])
    assert climber._scores(first[None, :])[0] >= climber._scores(single_knob_moves(space, first[None, :])).max()


def test_sustained_estimate_ranks_a_dma_bound_conv_closer_to_the_simulator():
    """FACTS' sustained DMA rate and per-block service (sus_total) rank the batch-64 ResNet downsample,
    where many small requests decide the time, closer to the simulator than the nominal bandwidth."""
    from tuner.search.features import ESTIMATE_COLUMN, SUSTAINED_COLUMN, features

    space = ScheduleSpace(Conv2d(64, 64, 56, 56, 128, 1, 1, stride_h=2, stride_w=2), "sw26010")
    rows = space.sample(3000, np.random.default_rng(3))
    x = features(space, rows)
    t = simulate(space, rows)
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    nominal = np.corrcoef(rank(x[:, ESTIMATE_COLUMN]), rank(t))[0, 1]
    sustained = np.corrcoef(rank(x[:, SUSTAINED_COLUMN]), rank(t))[0, 1]
    assert sustained > nominal + 0.03 and sustained > 0.9


def test_prior_option_picks_the_estimate_column():
    from tuner.search.features import ESTIMATE_COLUMN, SUSTAINED_COLUMN

    space = ScheduleSpace(Conv2d(1, 64, 27, 27, 192, 5, 5, pad_h=2, pad_w=2), "sw26010")
    assert create_strategy("model", space, prior="nominal").model.prior_column == ESTIMATE_COLUMN
    assert create_strategy("model", space, prior="sustained").model.prior_column == SUSTAINED_COLUMN
    with pytest.raises(ValueError):
        create_strategy("model", space, prior="measured")
