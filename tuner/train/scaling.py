"""Simulated data-parallel scaling of a training step over core groups and nodes: the step's simulated
time plus an allreduce of its gradients from a network model.

A TaihuLight node is one SW26010: 4 core groups (one MPI rank each) sharing the node's memory. The
gradients are averaged hierarchically, as MPI libraries do on multi-core nodes: a reduce-scatter and
an all-gather among the node's ranks through shared memory, then a ring allreduce among the nodes
(each link carrying ``2 (N-1)/N`` of the bytes, ``2 (N-1)`` latencies). The program runs the allreduce
after the backward, not overlapped with it, and so does the model.

Figures (``[S]`` quoted from a source, not checked against hardware here; ``[A]`` assumption):
- network bandwidth per node 16 GB/s bidirectional, i.e. 8 GB/s each way, and about 1 us MPI latency
  [S] Fu et al., "The Sunway TaihuLight supercomputer: system and applications", Sci. China Inf. Sci.
  59 (2016), and Dongarra's 2016 report on TaihuLight (as quoted there; no measurement here);
- a super node of 256 nodes has full bisection; above it the central network is taken as 4x
  oversubscribed [A] (the same sources describe a tapered central network without a figure we can check);
- within a node: copies at the target's MPE copy bandwidth, 1 us per message [A].

Weak scaling keeps each rank's batch; strong scaling keeps the global batch, so each rank's compute
shrinks with its share. The step's compute at another per-rank batch is taken as proportional to the
batch [A] (kernels of a smaller batch run less efficiently: strong scaling is optimistic here).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.targets import Target, get_target

CGS_PER_NODE = 4


@dataclass(frozen=True)
class Network:
    link_Bps: float = 8e9  # one direction per node [S]
    latency_s: float = 1e-6  # MPI latency between nodes [S]
    supernode: int = 256  # nodes with full bisection [S]
    oversubscription: float = 4.0  # of the central network above a super node [A]
    shm_latency_s: float = 1e-6  # per message within a node [A]


def allreduce_seconds(nbytes: float, cgs: int, target: Target | str = "sw26010", net: Network = Network()) -> float:
    """Simulated seconds to average ``nbytes`` over ``cgs`` ranks (one per core group)."""
    if cgs <= 1:
        return 0.0
    tgt = get_target(target)
    local = min(cgs, CGS_PER_NODE)
    nodes = -(-cgs // CGS_PER_NODE)
    # reduce-scatter + all-gather among the node's ranks through shared memory
    t = 2 * (local - 1) / local * nbytes / tgt.mpe_copy_Bps + 2 * (local - 1) * net.shm_latency_s
    if nodes > 1:
        bw = net.link_Bps / (net.oversubscription if nodes > net.supernode else 1.0)
        t += 2 * (nodes - 1) / nodes * nbytes / bw + 2 * (nodes - 1) * net.latency_s
    return t


@dataclass(frozen=True)
class ScalingPoint:
    """Simulated data-parallel scaling of a step at ``cgs`` core groups, one rank each: the step time and
    efficiency with the batch per rank fixed (weak) and with the global batch fixed (strong)."""

    cgs: int
    weak_step_s: float
    weak_efficiency: float
    strong_step_s: float
    strong_efficiency: float


def scaling(step_s: float, grad_bytes: float, cgs: list[int], target: Target | str = "sw26010",
            net: Network = Network()) -> list[ScalingPoint]:
    """Weak and strong scaling of a step that takes ``step_s`` on one core group (its per-rank batch:
    the weak-scaling batch, and the strong-scaling global batch) and averages ``grad_bytes``."""
    out = []
    for p in cgs:
        comm = allreduce_seconds(grad_bytes, p, target, net)
        weak = step_s + comm
        strong = step_s / p + comm
        out.append(ScalingPoint(p, weak, step_s / weak, strong, step_s / (p * strong)))
    return out
