"""Consecutive CPE steps share one athread spawn: phases separated by an array barrier.

Every CPE kernel of a model (a tuned GEMM-like kernel, a memory-bound operator's kernel, a conv
input's padding) is a function ``swtune_kernel_<i>(swtune_args *)`` in slave.c. When several of them
run back to back with no MPE step between, the host spawns one group function instead, which calls
them in order on the same arguments it was given (one ``swtune_args`` per phase) with
``athread_ssync_array()`` between phases. Each phase waits for its own DMA puts before it returns,
so after the barrier the next phase reads complete data from main memory; phases run one at a time,
so their LDM buffers still share the slave file's union.

What this saves is the spawn + join of every phase after the first (``Target.spawn_join_s``); each
barrier costs ``Target.cpe_sync_cycles``. Both are charged by tuner.aot.timing, and the memory-bound
operators' placement (tuner.aot.cpe_ops.offload) compares the MPE against that grouped cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.ir.graph import Graph, Node
from tuner.targets import Target

CPE_OPS = ("kernel", "cpe")
# whether two consecutive steps may share one spawn (and fuse): one library call of framework-style
# execution (tuner.aot.framework_style); None everywhere means swtune's own program, where any may
SameCall = Callable[[Node, Node], bool]


@dataclass
class Group:
    """Phases (nodes, in program order) spawned together as ``swtune_group_<index>``."""

    index: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"swtune_group_{self.index}"


def phase_seconds(target: Target, split: bool = False) -> float:
    """What a phase after the first costs beyond its own kernel time: the barrier, minus the spawn +
    join it no longer needs (negative: grouping saves time). On a target of several core groups a
    phase boundary is also a barrier across them (``Target.cg_sync_s``), and a phase whose kernel is
    ``split`` over CGs (its time holds their launch, tuner/space/chip.py) no longer launches them."""
    barrier = target.cpe_sync_cycles / target.clock_hz
    if target.cgs > 1:
        barrier += target.cg_sync_s - (target.cg_launch_s if split else 0.0)
    return barrier - target.spawn_join_s


def runs(graph: Graph, same_call: SameCall | None = None) -> list[list[Node]]:
    """Maximal runs of consecutive CPE steps (notes in between do not run and do not break a run;
    ``same_call``: each run within one library call)."""
    out: list[list[Node]] = []
    cur: list[Node] = []
    for n in graph.nodes:
        if n.op in CPE_OPS and cur and same_call is not None and not same_call(cur[-1], n):
            out.append(cur)
            cur = []
        if n.op in CPE_OPS:
            cur.append(n)
            continue
        if cur:
            out.append(cur)
        cur = []
    if cur:
        out.append(cur)
    return out


def assign_groups(graph: Graph, same_call: SameCall | None = None) -> list[Group]:
    """Give every run of two or more CPE steps a group (``attrs["group"]``, ``attrs["phase"]``)."""
    groups: list[Group] = []
    for run in runs(graph, same_call):
        for n in run:
            n.attrs.pop("group", None)
            n.attrs.pop("phase", None)
        if len(run) < 2:
            continue
        g = Group(len(groups), list(run))
        for i, n in enumerate(run):
            n.attrs["group"] = g
            n.attrs["phase"] = i
        groups.append(g)
    return groups


def kernel_name(n: Node) -> str:
    """The slave function of a CPE step."""
    return str(n.attrs["kernel"].name if n.op == "kernel" else n.attrs["cpe"].name)


def slave_wrappers(groups: list[Group]) -> list[str]:
    """The group functions of slave.c (after every kernel they call)."""
    lines = []
    for g in groups:
        calls = "\n  athread_ssync_array();\n".join(f"  {kernel_name(n)}(_arg + {i});"
                                                   for i, n in enumerate(g.nodes))
        lines.append(f"/* {len(g.nodes)} phases in one spawn, an array barrier between phases */\n"
                     f"void {g.name}(swtune_args *_arg) {{\n{calls}\n}}\n")
    return lines
