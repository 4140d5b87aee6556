"""Booster ensemble: ranks unseen configs, its members disagree (the spread), saves and loads."""

from __future__ import annotations

import numpy as np

from cost_model import BoosterEnsemble


def synthetic(n: int, seed: int = 0, low: float = 0.0, high: float = 1.0):
    rng = np.random.default_rng(seed)
    x = low + (high - low) * rng.random((n, 4))
    return x, np.exp(2.0 * x[:, 0] - 1.5 * x[:, 1] + 0.3 * np.sin(6 * x[:, 2]))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_ensemble_ranks_unseen_configs():
    x, t = synthetic(500)
    model = BoosterEnsemble(4, seed=1)
    assert not model.trained
    model.update(x[:400], t[:400])
    assert model.trained
    assert spearman(model.predict(x[400:]), -t[400:]) > 0.8  # higher score = faster


def test_members_disagree_and_the_mean_is_their_average():
    x, t = synthetic(300)
    model = BoosterEnsemble(4, seed=2)
    model.update(x[:200], t[:200])
    mean, spread = model.predict_with_spread(x[200:])
    assert (spread > 0).mean() > 0.5  # subsampled, differently seeded members: an uncertainty signal
    members = np.stack([m.predict(x[200:]) for m in model.members])
    standardised = (members - members.mean(axis=1, keepdims=True)) / members.std(axis=1, keepdims=True)
    np.testing.assert_allclose(mean, standardised.mean(axis=0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(spread, standardised.std(axis=0), rtol=1e-9, atol=1e-12)


def test_save_and_load_give_the_same_scores(tmp_path):
    x, t = synthetic(300)
    model = BoosterEnsemble(3, seed=5)
    model.update(x, t)
    model.save(tmp_path / "ens")
    again = BoosterEnsemble.load(tmp_path / "ens")
    np.testing.assert_allclose(again.predict(x), model.predict(x), rtol=1e-6)
