"""Consecutive memory-bound CPE steps of one cut become one CPE kernel (tuner.space.cpe.fused).

Runs after tuner.aot.cpe_ops.offload has put every operator with a CPE kernel on the CPEs
tentatively and before tuner.aot.placement decides where each runs. A run of consecutive tentative
steps whose kernels cut one way (an optimizer's update of one parameter, a batch norm's arithmetic)
becomes one ``cpe`` node when its fused kernel is faster than the steps as phases of one spawn; a
value only later members read stays in LDM. The fused node keeps its members (``attrs["members"]``):
when the placement sends it to the MPE, the members go back there one by one (``unfuse``).

A fused kernel is no tuning task: its configuration is the analysis' best (tuner.space.cpe.plan),
scalar C, and each member's meaning on blocks of that size is checked like a lone kernel's.
"""

from __future__ import annotations

import logging

from tuner.aot import cpe_ops
from tuner.aot.fusion import readers_by_root
from tuner.aot.launch_groups import phase_seconds
from tuner.ir.graph import Graph, Node, Tensor
from tuner.ir.tir import ctype
from tuner.space.cpe.cuts import MAX_PARAMS, same_meaning
from tuner.space.cpe.fused import Member, fuse_plans
from tuner.space.cpe.plan import CpeOp
from tuner.targets import Target

log = logging.getLogger("tuner.aot")


def _fusable(n: Node) -> bool:
    """A tentative CPE step (tuner.aot.placement can still move it) of an element-wise kernel: every
    operand it slices per leading index is sliced like its output (a per-channel operand the same
    for every leading index, or one fetched whole, aside). Operators whose block has another shape
    than their operand's (pads, reductions over trailing axes) are left out: ResNet-18's training step
    trained wrong with a fused nn.pad (tests/train_tests/test_resnet_training.py), a cause not yet found."""
    op = n.attrs.get("cpe") if n.op == "cpe" else None
    if not (isinstance(op, CpeOp) and op.plan is not None and op.window is None and "mpe_alt_s" in n.attrs
            and "members" not in n.attrs and len(op.plan.params) == len(n.inputs) + len(n.outputs)):
        return False
    out = op.plan.params[op.plan.n_inputs]
    return all((p.ext, p.inner) == (out.ext, out.inner) for p in op.plan.params if p.sliced and p.per_lead)


class _Run:
    """A candidate fused kernel: members in program order, what they read from outside and what they write."""

    def __init__(self, graph: Graph) -> None:
        self.readers = readers_by_root(graph)
        self.model_outputs = {t.root.id for t in graph.outputs}
        self.nodes: list[Node] = []

    def _written(self) -> dict[int, Tensor]:
        return {t.root.id: t for m in self.nodes for t in m.outputs}

    def admits(self, n: Node) -> bool:
        """``n`` may join: the same cut as the members, and what it reads of theirs it reads whole
        (no view), sliced as they wrote it."""
        if not self.nodes:
            return True
        a, b = self.nodes[0].attrs["cpe"].plan, n.attrs["cpe"].plan
        if (a.axis, a.lead, a.ext) != (b.axis, b.lead, b.ext):
            return False
        written = self._written()
        slices = {t.id: p for m in self.nodes for t, p in zip([*m.inputs, *m.outputs], m.attrs["cpe"].plan.params)}
        for t, p in zip([*n.inputs, *n.outputs], b.params):
            w = written.get(t.root.id)
            if (w is not None and w is not t) or slices.get(t.id, p) != p:
                return False  # a view of a member's output, or a tensor sliced another way than by a member
        ins, outs = self.operands([*self.nodes, n])
        return len(ins) + len(outs) <= MAX_PARAMS

    def operands(self, nodes: list[Node]) -> tuple[list[Tensor], list[Tensor]]:
        """(tensors read from outside, tensors something outside reads) of ``nodes`` fused."""
        ins: dict[int, Tensor] = {}
        written: set[int] = set()
        for m in nodes:
            for t in m.inputs:
                if t.root.id not in written:
                    ins.setdefault(t.id, t)
            written.update(t.root.id for t in m.outputs)
        members = {id(m) for m in nodes}
        outs = [t for m in nodes for t in m.outputs
                if t.root.id in self.model_outputs
                or any(id(r) not in members or any(u.root.id == t.root.id and u is not t for u in r.inputs)
                       for r in self.readers.get(t.root.id, []))]
        return list(ins.values()), outs


def _meaning_kept(m: Node, block: int, op: CpeOp, target: Target, dtype: str, seen: dict[tuple[int, int], bool]
                  ) -> bool:
    """Member ``m``'s slicing keeps its meaning on blocks of ``block``. Offload checked its kernel on
    its own blocks; where those cut the axis (more than one block along it) the same cut at another
    block size is trusted (a plan whose sliced legalization is wrong fails at every size that cuts:
    a reduction, a flip or a scan along the axis). Else it is checked here, once per plan and block
    size (nodes of one function share their plan)."""
    plan, own_op = m.attrs["cpe"].plan, m.attrs["cpe"]
    if own_op.block == block or own_op.nj > 1:
        return True
    key = (id(plan), block)
    if key not in seen:
        own = plan.op(target, block, op.db, op.active)
        seen[key] = own is not None and same_meaning(m, plan, own, dtype)
    return seen[key]


def _fused(graph: Graph, run: _Run, nodes: list[Node], target: Target, seen: dict[tuple[int, int], bool]
           ) -> Node | None:
    """The fused node of ``nodes``, or None when fusing does not pay or cannot keep their meaning."""
    ins, outs = run.operands(nodes)
    if not outs:
        return None
    members = [Member(m.attrs["cpe"].plan, tuple(t.id for t in [*m.inputs, *m.outputs])) for m in nodes]
    plan = fuse_plans(members, [t.id for t in ins], [t.id for t in outs], ctype(graph.dtype))
    op = plan.best(target, cpe_ops.choose) if plan is not None else None  # as a lone kernel's is chosen
    if op is None:
        return None
    phase = phase_seconds(target)
    as_phases = sum(m.attrs["cpe"].seconds + phase for m in nodes) - phase
    if op.seconds >= as_phases:
        return None
    for m in nodes:  # each member's slicing keeps its meaning at the fused block size
        if not _meaning_kept(m, op.block, op, target, graph.dtype, seen):
            log.info("%s: fusing %d steps changes a result at blocks of %d", nodes[0].source, len(nodes), op.block)
            return None
    attrs = {"cpe": op, "mpe_alt_s": sum(m.attrs["mpe_alt_s"] for m in nodes),  # on the MPE: unfuse
             "members": nodes, "extra_outputs": outs[1:]}
    return Node("cpe", ins, outs[0], attrs, f"fused({', '.join(m.relax_op for m in nodes)})", nodes[0].source)


def fuse_runs(graph: Graph, target: Target) -> int:
    """Fuse the runs of consecutive tentative CPE steps that cut one way; returns the fused nodes made."""
    groups: list[list[Node]] = []
    run = _Run(graph)
    for s in graph.steps:
        if not isinstance(s, Node):
            continue  # a note runs nothing: it does not break a run
        if _fusable(s) and run.admits(s):
            run.nodes.append(s)
            continue
        groups.append(run.nodes)
        run.nodes = [s] if _fusable(s) else []
    groups.append(run.nodes)
    made = 0
    seen: dict[tuple[int, int], bool] = {}
    for nodes in groups:
        fused = _fused(graph, run, nodes, target, seen) if len(nodes) > 1 else None
        if fused is None:
            continue
        at = _position(graph, nodes[-1])  # where its last member ran: everything it reads is ready
        graph.steps[at] = fused
        gone = {id(m) for m in nodes[:-1]}
        graph.steps = [s for s in graph.steps if id(s) not in gone]
        made += 1
    return made


def _position(graph: Graph, n: Node) -> int:
    return next(i for i, s in enumerate(graph.steps) if s is n)


def unfuse(graph: Graph, n: Node) -> None:
    """A fused node the placement keeps on the MPE: its members back there, in order, in its place."""
    at = _position(graph, n)
    members: list[Node] = n.attrs["members"]
    for m in members:
        m.op = m.attrs["mpe_op"]
        del m.attrs["cpe"]
    graph.steps[at:at + 1] = members
