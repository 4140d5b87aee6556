"""Model-guided search: an XGBoost cost model steers an evolutionary search over its predictions.

Each round: (re)train the model when the data has grown enough (adaptive retraining, as Ansor and
MetaSchedule do), evolve a population that starts from the best measured configs and from random
valid ones by neighbour moves, keeping the configs the model ranks highest, then propose the best
unseen ones plus an epsilon share of random configs for exploration. A ``local`` share of each round
goes to a model-guided local search: every valid single-knob change of the ``local_starts`` best
*measured* configs plus ``local_pairs`` random two-knob moves from each, ranked by the model (the
evolutionary population alone drifts around the model's optimum, which the model misplaces by a few
percent; measured incumbents anchor the search to the real objective). A ``climb`` share goes to the
end points of steepest ascent on the model (every single-knob move, each step) from the model's best
of a fresh sample and from the best measured configs: the optimum of a large space is a small region
that random moves rarely enter, while a chain of best moves walks into it (on the ResNet-18
downsample at batch 64 this cut the median trials to 95% of the reference from ~430 to ~180).
The model's prior is the features' roofline estimate at the sustained DMA rates (``prior``,
``prior_weight``); the boosters learn the measurements' residual over it. It no longer fades
(``prior_fade`` 0): with the nominal-bandwidth estimate a fading prior helped (the data had to
overrule an estimate that misranks DMA-bound configs), but the sustained-rate estimate ranks the
downsample's optimum first, and letting it fade made the model forget it after a few hundred
measurements in a basin three knobs away (2 of 5 downsample runs censored at 0.74). With ``ensemble`` > 1 the
model is a booster ensemble and configs are ranked by mean + ``kappa`` x spread of its members
(exploration where the model is unsure). Nothing measured
or in flight is ever proposed again. With a ``base_model`` trained on other workloads (transfer), the
model is useful from the first round, so no random warm-up is spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from cost_model import BoosterEnsemble, CostModel, XGBoostCostModel
from tuner.search.base import SearchStrategy
from tuner.search.features import ESTIMATE_COLUMN, SUSTAINED_COLUMN, features
from tuner.search.neighbourhood import best_moves, moves_with_parents, single_knob_moves
from tuner.search.score_memo import ScoreMemo
from tuner.space.space import ScheduleSpace


class Prior(str, Enum):
    """Which roofline estimate of the features is the cost model's prior."""

    NOMINAL = "nominal"  # DMA at the nominal DRAM bandwidth
    SUSTAINED = "sustained"  # DMA at the measured plateau plus a per-block service (FACTS.md §2)


PRIOR_COLUMN = {Prior.NOMINAL: ESTIMATE_COLUMN, Prior.SUSTAINED: SUSTAINED_COLUMN}


@dataclass(frozen=True)
class Knobs:
    """How a round proposes (module docstring): its random share, the evolution, the local search and
    the climbs, and when the model retrains."""

    epsilon: float = 0.1  # share of random configs, for exploration
    population: int = 1024
    generations: int = 4
    elite: int = 32  # best measured configs seeding the population
    min_retrain: int = 8  # retrain once this many new measurements arrived ...
    retrain_growth: float = 0.2  # ... and the data grew by this share
    local: float = 0.25  # share of the round for the local search
    local_starts: int = 4
    local_pairs: int = 128
    climb: float = 0.5  # share of the round for steepest ascent
    climb_starts: int = 32
    climb_steps: int = 6
    climb_pool: int = 4


class ModelGuidedSearch(SearchStrategy):
    name = "model"

    def __init__(self, space: ScheduleSpace, seed: int = 0, cost_model: CostModel | None = None,
                 base_model: CostModel | None = None, n_init: int | None = None, objective: str = "rank",
                 ensemble: int = 0, kappa: float = 0.5, prior_weight: float = 1.0, prior_fade: float = 0.0,
                 prior: Prior | str = Prior.SUSTAINED, **knobs: Any) -> None:
        """``knobs``: any field of :class:`Knobs` by name (TypeError for another name)."""
        super().__init__(space, seed)
        self.knobs = Knobs(**knobs)
        if cost_model is None:
            column = PRIOR_COLUMN[Prior(prior)] if prior_weight > 0 else None
            if ensemble > 1:
                cost_model = BoosterEnsemble(ensemble, objective=objective, seed=seed, base=base_model,
                                             prior_column=column, prior_weight=prior_weight, prior_fade=prior_fade)
            else:
                cost_model = XGBoostCostModel(objective=objective, seed=seed, base=base_model, prior_column=column,
                                              prior_weight=prior_weight, prior_fade=prior_fade)
        self.model = cost_model
        self.kappa = kappa
        self.n_init = n_init if n_init is not None else (0 if base_model is not None else 16)
        self._features: list[np.ndarray] = []
        self._trained_on = 0
        self._memo = ScoreMemo(space)  # the model's scores of configs scored since it last changed

    # --- learning -------------------------------------------------------------------------------
    def _observe(self) -> None:
        new = self.measured_index[len(self._features):]
        if new:
            self._features.extend(features(self.space, np.stack(new)))

    def _maybe_retrain(self) -> None:
        n = self.n_measured
        grown = n - self._trained_on
        if n == 0 or grown < max(self.knobs.min_retrain, self.knobs.retrain_growth * self._trained_on):
            return
        self.model.update(np.stack(self._features), np.asarray(self.measured_time))
        self._trained_on = n
        self._memo.clear()

    # --- proposing ------------------------------------------------------------------------------
    def _scores(self, rows: np.ndarray) -> np.ndarray:
        return self._memo.scores(rows, self._predict)

    def _predict(self, rows: np.ndarray) -> np.ndarray:
        x = features(self.space, rows)
        if isinstance(self.model, BoosterEnsemble) and self.kappa:
            mean, spread = self.model.predict_with_spread(x)
            return mean + self.kappa * spread
        return self.model.predict(x)

    def _evolve(self) -> tuple[np.ndarray, np.ndarray]:
        """Population after a few generations of neighbour moves, ranked by predicted score."""
        # a quarter of the population starts fresh each round (diversity); sampling valid configs is
        # the costliest part of a round, and the generations refill the population from the best
        starts = [self.space.sample(max(self.knobs.population // 4, 1), self.rng)]
        if self.measured_index:
            times = np.asarray(self.measured_time)
            best = np.argsort(times)[: self.knobs.elite]
            starts.append(np.stack([self.measured_index[i] for i in best if np.isfinite(times[i])] or
                                   [self.measured_index[0]]))
        pop = np.unique(np.concatenate(starts), axis=0)
        scores = self._scores(pop)
        for _ in range(self.knobs.generations):
            parents = pop[np.argsort(-scores)[: max(self.knobs.population // 4, 1)]]
            children = self.space.neighbours(np.repeat(parents, 4, axis=0), self.rng,
                                             n_moves=1 + int(self.rng.integers(0, 2)))
            child_scores = self._scores(children)
            pop = np.concatenate([pop, children])
            scores = np.concatenate([scores, child_scores])
            pop, first = np.unique(pop, axis=0, return_index=True)
            scores = scores[first]
            keep = np.argsort(-scores)[: self.knobs.population]
            pop, scores = pop[keep], scores[keep]
        return pop, scores

    def _local(self, n: int) -> list[np.ndarray]:
        """Up to ``n`` unseen neighbours of the best measured configs, best predicted first."""
        if n <= 0 or not self.measured_index:
            return []
        times = np.asarray(self.measured_time)
        order = [i for i in np.argsort(times)[: self.knobs.local_starts] if np.isfinite(times[i])]
        if not order:
            return []
        top = np.stack([self.measured_index[i] for i in order])
        cand = single_knob_moves(self.space, top)
        if self.knobs.local_pairs:  # two-knob moves: trade one tile against another at the LDM limit
            pairs = self.space.neighbours(np.repeat(top, self.knobs.local_pairs, axis=0), self.rng, n_moves=2)
            cand = np.unique(np.concatenate([cand, pairs]), axis=0) if len(cand) else pairs
        if len(cand) == 0:
            return []
        return self._fresh(cand[np.argsort(-self._scores(cand))], n)

    def _climb(self, n: int) -> list[np.ndarray]:
        """Up to ``n`` unseen end points of steepest ascent on the model from many starts.

        Starts: the model's best of a fresh random sample and the best measured configs. Each step
        moves every start to its best-scoring single-knob neighbour; a start that no move improves
        is a local optimum of the model. Unlike the evolution's random moves this crosses regions
        a chain of exact moves reaches (e.g. a smaller tile, then double buffering in the freed LDM).
        """
        if n <= 0:
            return []
        fresh = self.space.sample(self.knobs.climb_pool * self.knobs.climb_starts, self.rng)
        fresh = fresh[np.argsort(-self._scores(fresh))[: self.knobs.climb_starts]]
        starts = [fresh]
        if self.measured_index:
            times = np.asarray(self.measured_time)
            best = [i for i in np.argsort(times)[: self.knobs.climb_starts // 2] if np.isfinite(times[i])]
            if best:
                starts.append(np.stack([self.measured_index[i] for i in best]))
        rows = np.unique(np.concatenate(starts), axis=0)
        scores = self._scores(rows)
        for _ in range(self.knobs.climb_steps):
            moves, parents = moves_with_parents(self.space, rows)
            if len(moves) == 0:
                break
            new_rows, new_scores = best_moves(rows, scores, moves, parents, self._scores(moves))
            if np.array_equal(new_rows, rows):
                break
            rows, scores = new_rows, new_scores
        return self._fresh(rows[np.argsort(-scores)], n)

    def _random(self, n: int) -> list[np.ndarray]:
        picked: list[np.ndarray] = []
        for _ in range(10):
            picked += self._fresh(self.space.sample(max(4 * n, 64), self.rng), n - len(picked))
            if len(picked) >= n:
                break
        return picked[:n]

    def _propose(self, n: int) -> list[np.ndarray]:
        if self.n_measured < self.n_init and not self.model.trained:
            return self._random(n)
        self._maybe_retrain()
        if not self.model.trained:
            return self._random(n)
        n_explore = int(round(self.knobs.epsilon * n))
        picked = self._local(int(round(self.knobs.local * n)))
        keys = {self._key(r) for r in picked}
        for row in self._climb(min(int(round(self.knobs.climb * n)), n - n_explore - len(picked))):
            if self._key(row) not in keys:
                picked.append(row)
                keys.add(self._key(row))
        pop, scores = self._evolve()
        for row in pop[np.argsort(-scores)]:
            if len(picked) >= n - n_explore:
                break
            key = self._key(row)
            if key not in keys and key not in self._seen:
                picked.append(row)
                keys.add(key)
        for row in self._random(n - len(picked) + 4):
            if len(picked) >= n:
                break
            if self._key(row) not in keys:
                picked.append(row)
                keys.add(self._key(row))
        return picked
