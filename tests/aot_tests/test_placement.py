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


def _fused(members: list[Node], seconds: float) -> Node:
    """A fused kernel of ``members`` (tentative CPE steps) as tuner.aot.cpe_fusion makes one."""
    attrs = {"cpe": SimpleNamespace(seconds=seconds), "mpe_alt_s": sum(m.attrs["mpe_alt_s"] for m in members),
             "members": members}
    return Node("cpe", members[0].inputs, members[-1].output, attrs, "fused", members[0].source)


def test_a_fused_kernel_that_does_not_pay_becomes_its_members_each_placed_on_its_own() -> None:
    # after a GEMM kernel: a weight's update (a phase of its spawn beats the MPE) and a bias's (the MPE
    # wins); fused, they take a cut worse than the weight's own, and lose to the pair placed apart
    # (MLP's SGD step: 1.36 us against 1.77 us, 1.0 us against 0.05 us, fused 2.24 us; each as a phase)
    steps = [("kernel", SPAWN + 1e-4, 0.0), ("cpe", 1.36e-6 - SHARE, 1.77e-6), ("cpe", 1.0e-6 - SHARE, 0.05e-6)]
    g = _graph(steps)
    weight, bias = g.steps[1], g.steps[2]
    g.steps[1:] = [_fused([weight, bias], 2.24e-6 - SHARE)]
    assert place(g, TARGET) == 1
    assert g.nodes == [g.steps[0], weight, bias] and [n.op for n in g.nodes] == ["kernel", "cpe", "tir"]
    assert abs(_time(g, steps) - _brute_force(steps)) < 1e-12


def test_with_fused_kernels_the_placement_is_the_least_time_of_all_placements() -> None:
    import random

    rnd = random.Random(1)
    for _ in range(40):
        steps = [(rnd.choice(["kernel", "mpe", "cpe", "cpe", "cpe"]), SPAWN + rnd.uniform(0, 4e-5),
                  rnd.uniform(0, 6e-5)) for _ in range(rnd.randint(2, 8))]
        g = _graph(steps)
        fused_at = [i for i in range(len(steps) - 1) if steps[i][0] == steps[i + 1][0] == "cpe"][:1]
        fused_s = SPAWN + rnd.uniform(0, 5e-5)
        for i in fused_at:  # the pair fused, at a time that may or may not beat them apart
            g.steps[i:i + 2] = [_fused(g.steps[i:i + 2], fused_s)]
        place(g, TARGET)
        as_fused = [s for s in g.nodes if "members" in s.attrs]
        if as_fused:  # kept fused: its time against every placement with it fused
            alone = [s for j, s in enumerate(steps) if j not in (fused_at[0], fused_at[0] + 1)]
            fused_step = ("kernel", fused_s, 0.0)
            with_fused = alone[:fused_at[0]] + [fused_step] + alone[fused_at[0]:]
            assert abs(_time(g, with_fused) - _brute_force(with_fused)) < 1e-12, steps
            assert _time(g, with_fused) <= _brute_force(steps) + 1e-12, steps
        else:
            assert abs(_time(g, steps) - _brute_force(steps)) < 1e-12, steps
            if fused_at:
                i = fused_at[0]
                with_fused = steps[:i] + [("kernel", fused_s, 0.0)] + steps[i + 2:]
                assert _brute_force(steps) <= _brute_force(with_fused) + 1e-12, steps
