"""Where each memory-bound operator runs: the placement of least simulated time over the whole program.

tuner.aot.cpe_ops.offload puts every operator that has a CPE kernel on the CPEs tentatively, with its
MPE time beside it (``mpe_alt_s``). A CPE step costs its kernel's time, spawn and join included; one
that follows another CPE step shares its spawn (tuner.aot.launch_groups) and costs
``phase_seconds`` less. So whether an operator belongs on the CPEs depends on its neighbours: a run of
small element-wise operators (an optimizer's update, a batch norm's arithmetic) is worth one spawn,
while each alone is faster on the MPE. A dynamic program over the steps in order (state: whether the
step before ran on the CPEs) finds the placement of least total time; GEMM-like kernels stay on the
CPEs, every other MPE step stays on the MPE. A fused kernel (tuner.aot.cpe_fusion) moves as one step
(its MPE time the sum of its members'); sent to the MPE, it becomes its members again.
"""

from __future__ import annotations

from tuner.aot.cpe_fusion import unfuse
from tuner.aot.launch_groups import CPE_OPS, phase_seconds
from tuner.ir.graph import Graph, Node
from tuner.targets import Target


def _movable(n: Node) -> bool:
    """A step offload put on the CPEs tentatively (it can go back to its MPE form)."""
    return n.op == "cpe" and "mpe_alt_s" in n.attrs


def place(graph: Graph, target: Target) -> int:
    """Send back to the MPE the tentative CPE steps the least-time placement keeps there; returns how
    many stay on the CPEs."""
    share = phase_seconds(target)  # negative: a phase after the first saves a spawn + join
    nodes = graph.nodes
    # best[s]: least time of the steps so far, ending on the MPE (s = 0) or on the CPEs (s = 1);
    # choice[i][s]: the state of step i - 1 that led there, and where step i runs
    inf = float("inf")
    best = [0.0, inf]
    choices: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for n in nodes:
        # the cheapest way to reach this step: for an MPE step, and for a CPE step (sharing a spawn after one)
        on_mpe = (best[0], 0) if best[0] <= best[1] else (best[1], 1)
        on_cpe = (best[0], 0) if best[0] <= best[1] + share else (best[1] + share, 1)
        if n.op in CPE_OPS and not _movable(n):  # a GEMM-like kernel: on the CPEs
            best, pick = [inf, on_cpe[0]], ((0, 0), (on_cpe[1], 1))
        elif _movable(n):
            best = [on_mpe[0] + n.attrs["mpe_alt_s"], on_cpe[0] + n.attrs["cpe"].seconds]
            pick = ((on_mpe[1], 0), (on_cpe[1], 1))
        else:  # an MPE step (its time does not depend on the placement)
            best, pick = [on_mpe[0], inf], ((on_mpe[1], 0), (0, 0))
        choices.append(pick)
    state = 0 if best[0] <= best[1] else 1
    kept = 0
    for n, pick in zip(reversed(nodes), reversed(choices)):
        before, where = pick[state]
        if _movable(n):
            if where == 0 and "members" in n.attrs:  # a fused kernel: its members, each on the MPE
                unfuse(graph, n)
            elif where == 0:
                n.op = n.attrs["mpe_op"]
                del n.attrs["cpe"]
            else:
                kept += 1
        state = before
    return kept
