"""XGBoost cost model: learns an order, learns failures as bad, transfers, saves and loads."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model import XGBoostCostModel, throughput_labels


def synthetic(n: int, seed: int = 0, shift: float = 0.0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 6))
    seconds = np.exp(2.0 * x[:, 0] - 1.5 * x[:, 1] + 0.3 * np.sin(6 * x[:, 2]) + shift)
    return x, seconds


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_labels_are_relative_throughput_per_group_and_failures_are_zero():
    labels = throughput_labels(np.array([2.0, 1.0, np.inf, 10.0, 5.0]), np.array([0, 0, 0, 1, 1]))
    assert labels.tolist() == [0.5, 1.0, 0.0, 0.5, 1.0]


@pytest.mark.parametrize("objective, rho", [("rank", 0.8), ("ndcg", 0.7), ("regression", 0.8)])
def test_model_ranks_unseen_configs(objective, rho):
    x, t = synthetic(600)
    model = XGBoostCostModel(objective=objective)
    model.update(x[:400], t[:400])
    scores = model.predict(x[400:])
    assert spearman(scores, -t[400:]) > rho
    top = np.argsort(-scores)[:10]  # ndcg cares most about the head: the top picks are truly fast
    assert np.median(t[400:][top]) < np.quantile(t[400:], 0.25)


def test_failed_configs_are_learned_as_bad():
    x, t = synthetic(400)
    t[x[:, 3] > 0.7] = np.inf  # a region of the space always fails
    model = XGBoostCostModel()
    model.update(x, t)
    xt, _ = synthetic(200, seed=1)
    scores = model.predict(xt)
    assert scores[xt[:, 3] > 0.75].mean() < scores[xt[:, 3] < 0.65].mean()


def test_untrained_model_predicts_neutral_scores_and_tiny_histories_are_used():
    model = XGBoostCostModel()
    assert not model.trained and (model.predict(np.zeros((3, 6))) == 0).all()
    x, t = synthetic(4)
    model.update(x, t)
    assert model.trained and model.n_train == 4


def test_transfer_base_model_helps_before_own_data_and_fades():
    x_other, t_other = synthetic(800, seed=2, shift=1.0)  # another workload: same structure, other scale
    base = XGBoostCostModel()
    base.update(x_other, t_other)
    model = XGBoostCostModel(base=base, base_prior=64)
    x_new, t_new = synthetic(300, seed=3)
    assert model.trained and spearman(model.predict(x_new), -t_new) > 0.8  # useful with no own data
    model.update(x_new[:8], t_new[:8])
    weight_small = model._base_weight()
    model.update(x_new[:256], t_new[:256])
    assert model._base_weight() < weight_small < 1.0


def test_save_and_load_round_trip(tmp_path):
    x, t = synthetic(300)
    base = XGBoostCostModel(objective="regression")
    base.update(x, t)
    model = XGBoostCostModel(base=base)
    model.update(x[:100], t[:100])
    model.save(tmp_path / "m")
    again = XGBoostCostModel.load(tmp_path / "m")
    assert np.allclose(again.predict(x), model.predict(x))
    assert again.objective == "rank" and again.base is not None


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="objective"):
        XGBoostCostModel(objective="magic")
    with pytest.raises(ValueError, match="feature rows"):
        XGBoostCostModel().update(np.zeros((3, 2)), np.zeros(2))


def test_prior_column_ranks_before_any_data_then_fades_and_survives_save(tmp_path):
    x, t = synthetic(400, seed=5)
    estimate = np.log2(t) + np.random.default_rng(1).normal(0.0, 0.3, len(t))  # a noisy estimate of log time
    xp = np.column_stack([x, estimate])
    model = XGBoostCostModel(prior_column=6, prior_weight=1.0, prior_fade=32)
    assert model.trained and spearman(model.predict(xp), -t) > 0.8  # the prior alone ranks
    assert np.allclose(model.predict(xp), -estimate)
    model.update(xp[:16], t[:16])
    early = model._prior(xp)
    model.update(xp[:300], t[:300])
    assert np.abs(model._prior(xp)).sum() < np.abs(early).sum()  # the own data takes over
    assert spearman(model.predict(xp[300:]), -t[300:]) > 0.8
    model.save(tmp_path / "p")
    again = XGBoostCostModel.load(tmp_path / "p")
    assert again.prior_column == 6 and np.allclose(again.predict(xp), model.predict(xp))


@pytest.mark.parametrize("objective", ["rank", "ndcg", "regression"])
def test_prediction_over_a_base_margin_is_xgboosts_own(objective):
    """predict adds the base model's margin itself (XGBoost's base_margin argument costs more than the
    prediction): the scores are the ones XGBoost gives with that margin, for every objective we use."""
    x_other, t_other = synthetic(300, seed=2, shift=1.0)
    base = XGBoostCostModel(objective=objective)
    base.update(x_other, t_other)
    model = XGBoostCostModel(objective=objective, base=base, base_prior=64)
    x, t = synthetic(200, seed=3)
    model.update(x[:100], t[:100])
    features = x[100:].astype(np.float32)
    want = model.booster.inplace_predict(features, base_margin=model._base_margin(features))
    assert model.intercept != 0.0 or objective != "regression"  # the intercept is really subtracted
    assert np.allclose(model.predict(features), want, rtol=1e-5, atol=1e-5)
