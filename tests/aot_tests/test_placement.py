"""tuner.aot.placement: memory-bound operators go where the whole program is fastest, a run of CPE steps
sharing one spawn; checked against every placement of small hand-made programs."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from tuner.aot.launch_groups import phase_seconds, runs
from tuner.aot.placement import place
from tuner.ir.graph import Graph, Node, Tensor
from tuner.targets import get_target

TARGET = get_target("sw26010")
SPAWN = TARGET.spawn_join_s
SHARE = phase_seconds(TARGET)


def _graph(steps: list[tuple[str, float, float]]) -> Graph:
    """("kernel" | "mpe" | "cpe", CPE seconds, MPE seconds) per step; "cpe" steps are tentative."""
    t = Tensor(0, (4,), "float32", "temp", "t")
    nodes = []
    for i, (kind, cpe, mpe) in enumerate(steps):
        attrs: dict = {}
        op = {"kernel": "kernel", "mpe": "tir", "cpe": "cpe"}[kind]
        if kind == "cpe":
            attrs = {"cpe": SimpleNamespace(seconds=cpe), "mpe_alt_s": mpe, "mpe_op": "tir"}
        nodes.append(Node(op, [t], t, attrs, "add", f"s{i}"))
    return Graph([t], [t], nodes, "float32")


def _time(graph: Graph, steps: list[tuple[str, float, float]]) -> float:
    """The program's time as tuner.aot.timing charges it: MPE steps their time, CPE steps theirs, each
    CPE step after another one in a run ``SHARE`` less."""
    total = 0.0
    for n, (kind, cpe, mpe) in zip(graph.nodes, steps):
        total += (cpe if kind == "kernel" else n.attrs["cpe"].seconds) if n.op in ("kernel", "cpe") else mpe
    return total + sum(len(r) - 1 for r in runs(graph)) * SHARE


def _brute_force(steps: list[tuple[str, float, float]]) -> float:
    movable = [i for i, s in enumerate(steps) if s[0] == "cpe"]
    best = float("inf")
    for where in itertools.product((False, True), repeat=len(movable)):
        g = _graph(steps)
        for i, on_cpe in zip(movable, where):
            if not on_cpe:
                g.nodes[i].op = "tir"
        best = min(best, _time(g, steps))
    return best


def test_a_run_of_small_operators_shares_one_spawn_a_lone_one_stays_on_the_mpe() -> None:
    small = ("cpe", SPAWN + 2e-6, 6e-6)  # 2 us of work on the CPEs, 6 us on the MPE
    steps = [("kernel", SPAWN + 1e-4, 0.0), small, small, ("mpe", 0.0, 1e-6), small, ("mpe", 0.0, 1e-6)]
    g = _graph(steps)
    kept = place(g, TARGET)
    # the two after the kernel join its spawn; the one between MPE steps would need a spawn of its own
    assert [n.op for n in g.nodes] == ["kernel", "cpe", "cpe", "tir", "tir", "tir"] and kept == 2
    assert abs(_time(g, steps) - _brute_force(steps)) < 1e-12


def test_the_placement_is_the_least_time_of_all_placements() -> None:
    import random

    rnd = random.Random(0)
    for _ in range(40):
        steps = []
        for _ in range(rnd.randint(1, 9)):
            kind = rnd.choice(["kernel", "mpe", "cpe", "cpe"])
            steps.append((kind, SPAWN + rnd.uniform(0, 4e-5), rnd.uniform(0, 6e-5)))
        g = _graph(steps)
        place(g, TARGET)
        assert abs(_time(g, steps) - _brute_force(steps)) < 1e-12, steps
