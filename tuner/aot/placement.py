"""Where each memory-bound operator runs: the placement of least simulated time over the whole program.

tuner.aot.cpe_ops.offload puts every operator that has a CPE kernel on the CPEs tentatively, with its
MPE time beside it (``mpe_alt_s``). A CPE step costs its kernel's time, spawn and join included; one
that follows another CPE step shares its spawn (tuner.aot.launch_groups) and costs
``phase_seconds`` less. So whether an operator belongs on the CPEs depends on its neighbours: a run of
small element-wise operators (an optimizer's update, a batch norm's arithmetic) is worth one spawn,
while each alone is faster on the MPE.

The placement is a shortest path over the steps in order, the state being whether the step before
ran on the CPEs. GEMM-like kernels stay on the CPEs, every other MPE step stays on the MPE. A fused
kernel (tuner.aot.cpe_fusion) is one edge over its members; its members are edges too, each on the
CPEs or the MPE alone, so a fused kernel that does not pay in its place becomes its members again,
each where it runs fastest (a weight's update on the CPEs beside a bias's on the MPE).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.aot.cpe_fusion import split
from tuner.aot.launch_groups import CPE_OPS, SameCall, phase_seconds
from tuner.ir.graph import Graph, Node
from tuner.targets import Target

MPE_STATE, CPE_STATE = 0, 1


def _movable(n: Node) -> bool:
    """A step offload put on the CPEs tentatively (it can go back to its MPE form)."""
    return n.op == "cpe" and "mpe_alt_s" in n.attrs


@dataclass(frozen=True)
class _Edge:
    """Running ``node`` (a step, or a fused kernel spanning its members) from ``start`` to ``end``
    of the flattened steps, in ``state``."""

    start: int
    end: int
    node: Node
    state: int


_Span = tuple[int, int, Node]  # a fused kernel over flattened steps [start, end)


def _flatten(nodes: list[Node]) -> tuple[list[Node], list[_Span]]:
    """The steps with every movable fused kernel replaced by its members, and each fused kernel's span."""
    flat: list[Node] = []
    spans: list[_Span] = []
    for n in nodes:
        if _movable(n) and "members" in n.attrs:
            spans.append((len(flat), len(flat) + len(n.attrs["members"]), n))
            flat.extend(n.attrs["members"])
        else:
            flat.append(n)
    return flat, spans


def _step_costs(n: Node) -> dict[int, float]:
    """A step's own time by where it runs (without the spawn a CPE step shares after another)."""
    if _movable(n):
        return {MPE_STATE: n.attrs["mpe_alt_s"], CPE_STATE: n.attrs["cpe"].seconds}
    if n.op in CPE_OPS:  # a GEMM-like kernel: on the CPEs
        return {CPE_STATE: 0.0}  # its time does not depend on the placement
    return {MPE_STATE: 0.0}


def place(graph: Graph, target: Target, same_call: SameCall | None = None) -> int:
    """Send back to the MPE the tentative CPE steps the least-time placement keeps there; returns how
    many stay on the CPEs. ``same_call``: only steps of one library call share a spawn
    (tuner.aot.framework_style)."""
    share = phase_seconds(target)  # negative: a phase after the first saves a spawn + join
    flat, spans = _flatten(graph.nodes)
    fused_from: dict[int, list[_Span]] = {}
    for span in spans:
        fused_from.setdefault(span[0], []).append(span)
    inf = float("inf")
    # best[i][s]: least time of the first i flattened steps, the last of them run in state s;
    # how[i][s]: the edge that got there and the state before it
    best = [[inf, inf] for _ in range(len(flat) + 1)]
    how: list[list[tuple[_Edge, int] | None]] = [[None, None] for _ in range(len(flat) + 1)]
    best[0][MPE_STATE] = 0.0

    def relax(edge: _Edge, cost: float) -> None:
        shares = edge.state == CPE_STATE and edge.start > 0 and (
            same_call is None or same_call(flat[edge.start - 1], flat[edge.start]))
        for before in (MPE_STATE, CPE_STATE):
            t = best[edge.start][before] + cost + (share if before == CPE_STATE and shares else 0.0)
            if t < best[edge.end][edge.state]:
                best[edge.end][edge.state] = t
                how[edge.end][edge.state] = (edge, before)

    for i, n in enumerate(flat):
        for start, end, fused in fused_from.get(i, []):
            relax(_Edge(start, end, fused, CPE_STATE), fused.attrs["cpe"].seconds)
        for state, cost in _step_costs(n).items():
            relax(_Edge(i, i + 1, n, state), cost)
    # walk back from the cheaper end, collecting each edge taken
    taken: list[_Edge] = []
    at, state = len(flat), (MPE_STATE if best[-1][MPE_STATE] <= best[-1][CPE_STATE] else CPE_STATE)
    while at > 0:
        entry = how[at][state]
        assert entry is not None
        edge, state = entry
        taken.append(edge)
        at = edge.start
    chosen = {id(e.node) for e in taken}
    for _, _, fused in spans:
        if id(fused) not in chosen:  # its members run one by one, each where the path put it
            split(graph, fused)
    kept = 0
    for e in taken:
        if not _movable(e.node):
            continue
        if e.state == MPE_STATE:
            e.node.op = e.node.attrs["mpe_op"]
            del e.node.attrs["cpe"]
        else:
            kept += 1
    return kept
