"""Data-parallel training over MPI: 4 ranks of the emulated program against 1, and the scaling model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tools import require

from tuner.train.scaling import CGS_PER_NODE, Network, allreduce_seconds, scaling


@pytest.mark.slow
def test_four_ranks_match_one_rank_on_the_same_global_batch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    require("mpicc", "mpirun")
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape
    from tuner.models.trainable import build_trainable
    from tuner.train import data as train_data
    from tuner.train.checks import ranks_against_one
    from tuner.train.program import run_emulated

    module, inputs = build_trainable("mlp", 8)
    opt = Optimizer(OptimizerKind.ADAM, 0.001)
    batches = train_data.synthetic(4, 3, 8, tuple(inputs[0].shape), target_shape(module, inputs, Loss.CROSS_ENTROPY),
                                   Loss.CROSS_ENTROPY)
    a, b = ranks_against_one(module, inputs, opt, Loss.CROSS_ENTROPY, batches, 4, tmp_path, 5, "mlp")
    assert float(np.abs(a.losses - b.losses).max() / np.abs(a.losses).max()) <= 1e-5
    assert float(np.abs(a.state - b.state).max() / np.abs(a.state).max()) <= 1e-5
    four = tmp_path / "4_ranks"
    assert "allreduce" in (four / "host.c").read_text() and "MPI_Allreduce" in (four / "host.c").read_text()
    # each rank saw a different slice: a program run alone on one slice gives other losses
    alone = run_emulated(four, four / "data.bin", 5, "float32", ranks=1)
    assert float(np.abs(alone.losses - a.losses).max()) > 1e-4


def test_the_allreduce_costs_nothing_alone_and_more_across_nodes_than_within_one() -> None:
    mb = 4e6
    assert allreduce_seconds(mb, 1) == 0.0
    within = allreduce_seconds(mb, CGS_PER_NODE)
    across = allreduce_seconds(mb, 2 * CGS_PER_NODE)
    assert 0 < within < across
    # above a super node the central network is oversubscribed: the ring slows down
    net = Network()
    edge = allreduce_seconds(mb, CGS_PER_NODE * net.supernode, net=net)
    beyond = allreduce_seconds(mb, CGS_PER_NODE * (net.supernode + 1), net=net)
    assert beyond > edge * 2
    # a ring's bandwidth term tends to 2 * bytes / link bandwidth
    big = allreduce_seconds(mb, CGS_PER_NODE * 200, net=net)
    assert big == pytest.approx(2 * mb / net.link_Bps + within + 2 * 199 * net.latency_s, rel=0.02)


def test_scaling_efficiency_falls_with_the_allreduce_and_strong_scaling_falls_faster() -> None:
    points = scaling(0.050, 4e6, [1, 4, 64, 4096])
    assert points[0].weak_efficiency == 1.0 and points[0].strong_efficiency == 1.0
    weak = [p.weak_efficiency for p in points]
    strong = [p.strong_efficiency for p in points]
    assert weak == sorted(weak, reverse=True) and strong == sorted(strong, reverse=True)
    assert all(s <= w for s, w in zip(strong, weak))
