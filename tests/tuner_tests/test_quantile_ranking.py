"""Ranking by a quantile of a config's time over a fitted profile's draws (tuner/calibrate/quantile.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.app import build_app
from tuner.calibrate.intervals import simulated_seconds
from tuner.calibrate.quantile import QuantileError, QuantileRanking
from tuner.measure.base import MeasureResult
from tuner.measure.simulator import Simulator
from tuner.profile import Profile, default_profile
from tuner.space.factory import space_for
from tuner.space.space import Config, config_hash
from tuner.targets import Target
from tuner.tune import tune_workloads
from tuner.workloads import Dense, Workload

DENSE = Dense(64, 256, 256, "float32")


def _uncertain_profile() -> Profile:
    """A profile whose draws leave the per-wait DMA cost wide open (0-3000 cycles), all else fixed."""
    base = default_profile("sw26010").with_values({"dma_wait_cycles": 1000.0}, version=3)
    draws = [{**base.values, "dma_wait_cycles": w} for w in np.linspace(0.0, 3000.0, 21)]
    return base.with_values({}, fit={"draws": draws})


@pytest.fixture(scope="module")
def configs() -> list[Config]:
    space = space_for(DENSE, "sw26010")
    rows = space.sample(60, np.random.default_rng(0))
    return [space.decode(r) for r in rows[space.is_valid(rows)]][:24]


def test_factors_are_the_quantile_of_the_draws_over_the_point_time(configs):
    profile = _uncertain_profile()
    ranking = QuantileRanking(profile, 0.9)
    factors = ranking.factors(DENSE, configs)
    for config, f in zip(configs[:4], factors[:4], strict=True):
        draws = [simulated_seconds(profile.with_values({"dma_wait_cycles": w}, fit={}), DENSE, config)
                 for w in np.linspace(0.0, 3000.0, 21)]
        assert f == pytest.approx(np.quantile(draws, 0.9) / simulated_seconds(profile, DENSE, config), rel=1e-9)
    # configs differ in how many waits they make, so the uncertainty (and the ranking) is not uniform
    assert factors.min() > 1.0 and factors.max() / factors.min() > 1.01
    assert np.all(QuantileRanking(profile, 0.1).factors(DENSE, configs) < 1.0)


def test_rank_scales_only_successful_times_and_says_so(configs):
    ranking = QuantileRanking(_uncertain_profile(), 0.75)
    measured = Simulator(noise=0.02, seed=1, profile=_uncertain_profile()).measure(DENSE, "sw26010", configs[:5])
    bad = MeasureResult(config={"tile_m": 1}, status="invalid_config", error="not in the space")
    ranked = ranking.rank(DENSE, [*measured, bad])
    factors = ranking.factors(DENSE, [r.config for r in measured])
    for r, s, f in zip(measured, ranked[:-1], factors, strict=True):
        np.testing.assert_allclose(s.times, np.array(r.times) * f)
        assert s.details["rank_quantile"] == 0.75 and s.details["quantile_factor"] == pytest.approx(f)
    assert ranked[-1] is bad


class _Recorder:
    """The simulator, remembering every result it returned."""

    def __init__(self, profile: Profile) -> None:
        self.sim, self.results = Simulator(noise=0.02, seed=6, profile=profile), []  # type: ignore[var-annotated]

    def preflight(self) -> None:
        self.sim.preflight()

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        out = self.sim.measure(workload, target, configs)
        self.results.extend(out)
        return out


def test_the_search_ranks_by_the_quantile_and_reports_the_measured_time():
    profile = _uncertain_profile()
    recorder = _Recorder(profile)
    [result] = tune_workloads([DENSE], "sw26010", trials=40, seed=1, profile=profile, rank_quantile=0.9,
                              backend=recorder)
    ok = [r for r in recorder.results if r.ok]
    factors = QuantileRanking(profile, 0.9).factors(DENSE, [r.config for r in ok])
    measured = np.array([r.mean_time for r in ok])
    ranked = measured * factors
    # in this run the fastest measured config is not the best ranked one, so the ranking decided
    assert int(np.argmin(measured)) != int(np.argmin(ranked))
    best = ok[int(np.argmin(ranked))]
    assert config_hash(result.best_config) == config_hash(best.config)
    assert result.best_time == pytest.approx(best.mean_time)  # measured, not scaled


def test_a_quantile_needs_draws_and_a_proper_level():
    with pytest.raises(QuantileError, match="no fit draws"):
        QuantileRanking(default_profile("sw26010"), 0.9)
    with pytest.raises(QuantileError, match="strictly between"):
        QuantileRanking(_uncertain_profile(), 1.0)
    with pytest.raises(ValueError, match="needs a fitted profile"):
        tune_workloads([DENSE], "sw26010", trials=4, rank_quantile=0.9)


def test_the_cli_ranks_by_a_quantile_only_with_a_profile(tmp_path):
    runner = CliRunner()
    refused = runner.invoke(build_app(), ["tune", "--trials", "4", "--rank-quantile", "0.9"])
    assert refused.exit_code != 0 and "--rank-quantile needs --profile" in refused.output
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_uncertain_profile().to_json()))
    done = runner.invoke(build_app(), ["tune", "--trials", "8", "--profile", str(path), "--rank-quantile", "0.9",
                                       "--json"])
    assert done.exit_code == 0, done.output
    line = json.loads(done.output.strip().splitlines()[-1])
    lo, hi = line["best_time_interval_s"]
    assert lo < hi and line["best_config"]
