"""Peer tuners driven on swtune's objective through one ask/tell adapter and the shared trial log.

Optuna TPE, nevergrad TwoPointsDE, SMAC (random-forest BO, ``smac`` >= 2.4) and scikit-optimize with
extra trees. All see the same knobs (ordered knobs as integer indices, categorical ones as choices) and
measure through ``objective.TrialLog``, as swtune does: a repeated proposal is answered from the log and an
invalid one is told back as a failure, neither costing a trial (the space's validity rule is thus given to
the peers for free). Every peer runs to the same trial cap as ours; a peer that keeps proposing only
repeats or invalid configs is stopped after ``MAX_ASKS_PER_TRIAL`` x cap asks, and its run is censored.
The objective told to the peers is log-seconds (SMAC: milliseconds, as its forest takes the log itself);
a failure is told as ten times the worst time seen.
"""

from __future__ import annotations

import math
import tempfile
from typing import Any

import numpy as np
from objective import TrialLog

from tuner.space.space import ScheduleSpace

MAX_ASKS_PER_TRIAL = 10
FAILURE_LOG_PENALTY = math.log(10.0)
SMAC_CHALLENGERS = 2000


class PeerSearch:
    name = "peer"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int) -> None:
        self.space = space
        self.seed = seed

    def ask(self) -> tuple[Any, np.ndarray]:
        raise NotImplementedError

    def tell(self, token: Any, value: float) -> None:
        raise NotImplementedError


class OptunaTPE(PeerSearch):
    name = "optuna_tpe"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int) -> None:
        super().__init__(space, seed, budget)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        self.dists = {
            k.name: (optuna.distributions.IntDistribution(0, len(k) - 1) if k.ordered
                     else optuna.distributions.CategoricalDistribution(list(range(len(k)))))
            for k in space.knobs
        }

    def ask(self) -> tuple[Any, np.ndarray]:
        trial = self.study.ask(self.dists)
        return trial, np.array([trial.params[k.name] for k in self.space.knobs], dtype=np.int64)

    def tell(self, token: Any, value: float) -> None:
        self.study.tell(token, value)


class Nevergrad(PeerSearch):
    """nevergrad's TwoPointsDE: on these spaces it beat NGOpt (the wizard) and the discrete (1+1)
    variants by 3-10x in trials at a fraction of their per-ask overhead, so it is the fairer peer."""

    name = "nevergrad_de"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int) -> None:
        super().__init__(space, seed, budget)
        import nevergrad as ng

        params = {
            k.name: (ng.p.TransitionChoice(list(range(len(k)))) if k.ordered else ng.p.Choice(list(range(len(k)))))
            for k in space.knobs
        }
        param = ng.p.Dict(**params)
        param.random_state = np.random.RandomState(seed)
        self.opt = ng.optimizers.TwoPointsDE(parametrization=param, budget=budget * MAX_ASKS_PER_TRIAL,
                                             num_workers=1)

    def ask(self) -> tuple[Any, np.ndarray]:
        cand = self.opt.ask()
        return cand, np.array([int(cand.value[k.name]) for k in self.space.knobs], dtype=np.int64)

    def tell(self, token: Any, value: float) -> None:
        self.opt.tell(token, value)


class Smac(PeerSearch):
    """SMAC 2 hyperparameter-optimisation facade: random forest surrogate, EI, local + random search of
    the acquisition function; ordered knobs as integers, the others categorical; deterministic objective
    (one evaluation per config, as the tuning log gives)."""

    name = "smac"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int) -> None:
        super().__init__(space, seed, budget)
        from ConfigSpace import Categorical, ConfigurationSpace, Integer
        from smac import HyperparameterOptimizationFacade, Scenario
        from smac.model.random_forest import RandomForest

        cs = ConfigurationSpace(seed=seed)
        for k in space.knobs:
            if len(k) == 1:
                continue  # SMAC refuses single-value ranges; the knob is fixed at index 0
            cs.add(Integer(k.name, (0, len(k) - 1)) if k.ordered else Categorical(k.name, list(range(len(k)))))
        self._dir = tempfile.TemporaryDirectory(prefix="smac-")
        scenario = Scenario(cs, deterministic=True, n_trials=budget * MAX_ASKS_PER_TRIAL, seed=seed,
                            output_directory=self._dir.name)
        facade = HyperparameterOptimizationFacade
        self.smac = facade(
            scenario, lambda config, seed=0: 0.0, overwrite=True, logging_level=40,
            initial_design=facade.get_initial_design(scenario, n_configs=16),
            # the facade's defaults but for the acquisition search's size (10,000 -> 2,000 challengers: its
            # per-trial overhead otherwise makes a 1,000-trial run take hours on the shared cores) and a
            # single-threaded forest (joblib threads only contend with the other runs here)
            model=RandomForest(log_y=True, n_trees=10, bootstrapping=True, ratio_features=1.0, min_samples_split=2,
                               min_samples_leaf=1, max_depth=2**20, configspace=cs, seed=seed, n_jobs=1),
            acquisition_maximizer=facade.get_acquisition_maximizer(scenario, challengers=SMAC_CHALLENGERS))

    def ask(self) -> tuple[Any, np.ndarray]:
        info = self.smac.ask()
        values = info.config
        row = [int(values[k.name]) if len(k) > 1 else 0 for k in self.space.knobs]
        return info, np.array(row, dtype=np.int64)

    def tell(self, token: Any, value: float) -> None:
        from smac.runhistory.dataclasses import TrialValue

        # SMAC's forest takes the log of costs itself (log_y): it gets milliseconds, which are positive
        self.smac.tell(token, TrialValue(cost=math.exp(value) * 1e3), save=False)


class SkoptExtraTrees(PeerSearch):
    """scikit-optimize's Optimizer with an extra-trees surrogate (its "ET" estimator), expected
    improvement maximised over a random sample of points."""

    name = "skopt_et"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int) -> None:
        super().__init__(space, seed, budget)
        from skopt import Optimizer
        from skopt.space import Categorical, Integer

        dims = [Integer(0, max(len(k) - 1, 1), name=k.name) if k.ordered
                else Categorical(list(range(len(k))) if len(k) > 1 else [0, 0], name=k.name)
                for k in space.knobs]
        self.sizes = [len(k) for k in space.knobs]
        self.opt = Optimizer(dims, base_estimator="ET", acq_func="EI", acq_optimizer="sampling",
                             n_initial_points=16, random_state=seed, acq_optimizer_kwargs={"n_points": 2000})

    def ask(self) -> tuple[Any, np.ndarray]:
        x = self.opt.ask()
        row = np.minimum(np.array([int(v) for v in x], dtype=np.int64), np.array(self.sizes) - 1)
        return x, row

    def tell(self, token: Any, value: float) -> None:
        self.opt.tell(token, value)


PEERS = {cls.name: cls for cls in (OptunaTPE, Nevergrad, Smac, SkoptExtraTrees)}


def run_peer(name: str, space: ScheduleSpace, seed: int, log: TrialLog) -> TrialLog:
    """Drive peer ``name`` until ``log`` is done (goal reached or cap trials counted) or it stalls."""
    peer = PEERS[name](space, seed, log.cap)
    worst = -math.inf
    asks = 0
    while not log.done and asks < MAX_ASKS_PER_TRIAL * log.cap:
        asks += 1
        token, row = peer.ask()
        seconds = float(log.evaluate(row[None, :])[0])
        if math.isfinite(seconds):
            value = math.log(seconds)
            worst = max(worst, value)
        else:
            value = (worst if math.isfinite(worst) else 0.0) + FAILURE_LOG_PENALTY
        peer.tell(token, value)
    return log
