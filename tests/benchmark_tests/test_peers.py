"""Every peer tuner runs through the shared trial log: it counts exactly the cap in new valid trials,
whatever it wasted on repeats and invalid proposals, and its curve never gets worse."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from objective import Objective, TrialLog  # noqa: E402
from peers import PEERS, run_peer  # noqa: E402

from tuner.space import ScheduleSpace  # noqa: E402
from tuner.workloads import Dense  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PEERS))
def test_peer_counts_only_new_valid_trials(name):
    space = ScheduleSpace(Dense(64, 256, 256, "float32"), "sw26010")
    log = run_peer(name, space, 0, TrialLog(Objective(space, seed=0, noise=0.0), cap=24))
    assert len(log.curve) == 24
    assert len(log.cache) == 24 + log.invalid  # every distinct proposal measured once, repeats free
    assert all(b <= a for a, b in zip(log.curve, log.curve[1:]))  # noise-free: the incumbent only improves
    assert np.isfinite(log.curve[-1])
