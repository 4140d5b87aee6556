"""Peer tuners driven on swtune's objective: Optuna's TPE and nevergrad (TwoPointsDE), through one ask/tell adapter.

Both see the same knobs (ordered knobs as integer indices, categorical ones as choices) and the
same simulator. Configs they propose that break the hardware rules are told back as failures (a
large penalty) but do not use up trials: the space's validity rule is given to them for free, which
is generous to the peers.
"""

from __future__ import annotations

import math

import numpy as np

from tuner.space.space import ScheduleSpace

PENALTY = 1e3  # log-seconds objective value for invalid configs


class PeerSearch:
    name = "peer"

    def __init__(self, space: ScheduleSpace, seed: int) -> None:
        self.space = space
        self.seed = seed

    def ask(self) -> tuple[object, np.ndarray]:
        raise NotImplementedError

    def tell(self, token: object, value: float) -> None:
        raise NotImplementedError


class OptunaTPE(PeerSearch):
    name = "optuna_tpe"

    def __init__(self, space: ScheduleSpace, seed: int) -> None:
        super().__init__(space, seed)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        self.dists = {
            k.name: (optuna.distributions.IntDistribution(0, len(k) - 1) if k.ordered
                     else optuna.distributions.CategoricalDistribution(list(range(len(k)))))
            for k in space.knobs
        }

    def ask(self) -> tuple[object, np.ndarray]:
        trial = self.study.ask(self.dists)
        return trial, np.array([trial.params[k.name] for k in self.space.knobs], dtype=np.int64)

    def tell(self, token: object, value: float) -> None:
        self.study.tell(token, value)


class Nevergrad(PeerSearch):
    """nevergrad's TwoPointsDE: on these spaces it beat NGOpt (the wizard) and the discrete (1+1)
    variants by 3-10x in trials at a fraction of their per-ask overhead, so it is the fairer peer."""

    name = "nevergrad_de"

    def __init__(self, space: ScheduleSpace, seed: int, budget: int = 1000) -> None:
        super().__init__(space, seed)
        import nevergrad as ng

        params = {
            k.name: (ng.p.TransitionChoice(list(range(len(k)))) if k.ordered else ng.p.Choice(list(range(len(k)))))
            for k in space.knobs
        }
        param = ng.p.Dict(**params)
        param.random_state = np.random.RandomState(seed)
        self.opt = ng.optimizers.TwoPointsDE(parametrization=param, budget=budget, num_workers=1)

    def ask(self) -> tuple[object, np.ndarray]:
        cand = self.opt.ask()
        return cand, np.array([int(cand.value[k.name]) for k in self.space.knobs], dtype=np.int64)

    def tell(self, token: object, value: float) -> None:
        self.opt.tell(token, value)


PEERS = {cls.name: cls for cls in (OptunaTPE, Nevergrad)}


def run_peer(name: str, space: ScheduleSpace, seed: int, budget: int, times_of, goal: float = 0.0,
             max_asks_per_trial: int = 10) -> list[float]:
    """Best-so-far seconds after each counted (valid) trial, stopping once ``goal`` seconds is reached."""
    peer = Nevergrad(space, seed, budget * max_asks_per_trial) if name == Nevergrad.name else PEERS[name](space, seed)
    curve: list[float] = []
    best = math.inf
    asks = 0
    while len(curve) < budget and asks < max_asks_per_trial * budget:
        asks += 1
        token, row = peer.ask()
        seconds = float(times_of(row[None, :])[0])
        if not math.isfinite(seconds):
            peer.tell(token, PENALTY)
            continue
        peer.tell(token, math.log(seconds))
        best = min(best, seconds)
        curve.append(best)
        if best <= goal:
            break
    return curve
