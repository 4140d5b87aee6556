"""Consecutive memory-bound CPE steps of one cut become one CPE kernel (tuner.space.cpe.fused).

Runs after tuner.aot.cpe_ops.offload has put every operator with a CPE kernel on the CPEs
tentatively and before tuner.aot.placement decides where each runs. A run of consecutive tentative
steps whose kernels cut one way (an optimizer's update of one parameter, a batch norm's arithmetic)
becomes one ``cpe`` node when its fused kernel is faster than the steps as phases of one spawn; a
value only later members read stays in LDM. A member whose own fastest cut differs from the run's
joins on another of its cuts when it has the run's (``_Cuts``). The fused node keeps its members
(``attrs["members"]``): when the placement finds the fused kernel does not pay in its place, the
members take its place again (``split``), each placed on its own.

A fused kernel is no tuning task: its configuration is the analysis' best (tuner.space.cpe.plan),
scalar C, and each member's meaning on blocks of that size is checked like a lone kernel's.
"""

from __future__ import annotations

import logging

from tuner.aot import cpe_ops
from tuner.aot.fusion import readers_by_root
from tuner.aot.launch_groups import SameCall, phase_seconds
from tuner.ir.cprint.dtypes import ctype
from tuner.ir.graph import Graph, Node, Tensor
from tuner.space.cpe.cuts import MAX_PARAMS, plans_for, same_meaning
from tuner.space.cpe.fused import Member, fuse_plans
from tuner.space.cpe.plan import CpeOp, KernelPlan, ParamSlice
from tuner.targets import Target

log = logging.getLogger("tuner.aot")


def _fusable(n: Node) -> bool:
    """A tentative CPE step (tuner.aot.placement can still move it) of an element-wise kernel
    (``_element_wise``)."""
    op = n.attrs.get("cpe") if n.op == "cpe" else None
    return (isinstance(op, CpeOp) and op.plan is not None and op.window is None and "mpe_alt_s" in n.attrs
            and "members" not in n.attrs and _element_wise(op.plan, n))


def _element_wise(plan: KernelPlan, n: Node) -> bool:
    """Every operand the plan slices per leading index is sliced like its output (a per-channel
    operand the same for every leading index, or one fetched whole, aside). Operators whose block has
    another shape than their operand's (pads, reductions over trailing axes) are left out: ResNet-18's
    training step trained wrong with a fused nn.pad (tests/train_tests/test_resnet_training.py)."""
    if plan.window is not None or len(plan.params) != len(n.inputs) + len(n.outputs):
        return False
    out = plan.params[plan.n_inputs]
    return all((p.ext, p.inner) == (out.ext, out.inner) for p in plan.params if p.sliced and p.per_lead)


def _cut(plan: KernelPlan) -> tuple[int, int, int]:
    return plan.axis, plan.lead, plan.ext


class _Cuts:
    """Every element-wise plan of a node, one per cut, its own plan first: a run's members may take
    another cut than their own fastest one to agree (a weight's momentum update whose multiply cuts
    rows and whose add cuts columns). Plans are shared by the nodes of one function."""

    def __init__(self, target: Target, dtype: str) -> None:
        self.target, self.dtype = target, dtype
        self._plans: dict[str, dict[tuple[int, int, int], KernelPlan]] = {}

    def of(self, n: Node) -> dict[tuple[int, int, int], KernelPlan]:
        own = n.attrs["cpe"].plan
        key = cpe_ops.kernel_key(n)
        if key not in self._plans:
            try:
                plans = plans_for(n, self.target, self.dtype)
            except Exception as exc:  # noqa: BLE001 - no other cut: the node keeps its own
                log.info("%s (%s): no other cut (%s: %s)", n.source, n.relax_op, type(exc).__name__, exc)
                plans = []
            self._plans[key] = {}
            for p in plans:
                if _element_wise(p, n):
                    self._plans[key].setdefault(_cut(p), p)
        return {_cut(own): own, **{c: p for c, p in self._plans[key].items() if c != _cut(own)}}


class _Run:
    """A candidate fused kernel: members in program order with the plan each runs in it, what they
    read from outside and what they write."""

    def __init__(self, graph: Graph, cuts: _Cuts) -> None:
        self.readers = readers_by_root(graph)
        self.model_outputs = {t.root.id for t in graph.outputs}
        self.cuts = cuts
        self.nodes: list[Node] = []
        self.plans: list[KernelPlan] = []
        self.options: list[dict[tuple[int, int, int], KernelPlan]] = []  # each member's cuts

    def start(self, n: Node | None) -> None:
        self.nodes, self.plans = ([n], [n.attrs["cpe"].plan]) if n is not None else ([], [])
        self.options = []  # looked up when a second node tries to join (plans_for legalizes)

    def admit(self, n: Node) -> bool:
        """Add ``n`` when all can cut one way (the run's cut first, else one of ``n``'s), and what it
        reads of the members' it reads whole (no view), sliced as they wrote it."""
        if not self.nodes:
            self.start(n)
            return True
        nodes = [*self.nodes, n]
        options = [*(self.options or [self.cuts.of(m) for m in self.nodes]), self.cuts.of(n)]
        for cut in dict.fromkeys([_cut(self.plans[0]), *options[-1]]):
            plans = [o.get(cut) for o in options]
            if all(p is not None for p in plans) and self._consistent(nodes, plans):  # type: ignore[arg-type]
                self.nodes, self.plans, self.options = nodes, plans, options  # type: ignore[assignment]
                return True
        return False

    def _consistent(self, nodes: list[Node], plans: list[KernelPlan]) -> bool:
        written: dict[int, Tensor] = {}
        slices: dict[int, ParamSlice] = {}
        for m, plan in zip(nodes, plans):
            for t, p in zip([*m.inputs, *m.outputs], plan.params):
                w = written.get(t.root.id)
                if (w is not None and w is not t) or slices.setdefault(t.id, p) != p:
                    return False  # a view of a member's output, or a tensor sliced another way than by a member
            written.update((t.root.id, t) for t in m.outputs)
        ins, outs = self.operands(nodes)
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


def _meaning_kept(m: Node, plan: KernelPlan, block: int, op: CpeOp, target: Target, dtype: str,
                  seen: dict[tuple[int, int], bool]) -> bool:
    """Member ``m``'s slicing by ``plan`` keeps its meaning on blocks of ``block``. Offload checked its
    own kernel on its own blocks; where those cut the axis (more than one block along it) the same cut
    at another block size is trusted (a plan whose sliced legalization is wrong fails at every size
    that cuts: a reduction, a flip or a scan along the axis). Else, and for another cut than its own,
    it is checked here, once per plan and block size (nodes of one function share their plans)."""
    own_op = m.attrs["cpe"]
    if plan is own_op.plan and (own_op.block == block or own_op.nj > 1):
        return True
    key = (id(plan), block)
    if key not in seen:
        own = plan.op(target, block, op.db, op.active)
        seen[key] = own is not None and same_meaning(m, plan, own, dtype)
    return seen[key]


def _fused(graph: Graph, run: _Run, nodes: list[Node], plans: list[KernelPlan], target: Target,
           seen: dict[tuple[int, int], bool]) -> Node | None:
    """The fused node of ``nodes`` cut by ``plans``, or None when fusing does not pay or cannot keep
    their meaning."""
    ins, outs = run.operands(nodes)
    if not outs:
        return None
    members = [Member(p, tuple(t.id for t in [*m.inputs, *m.outputs])) for m, p in zip(nodes, plans)]
    plan = fuse_plans(members, [t.id for t in ins], [t.id for t in outs], ctype(graph.dtype))
    op = plan.best(target, cpe_ops.choose) if plan is not None else None  # as a lone kernel's is chosen
    if op is None:
        return None
    phase = phase_seconds(target)
    as_phases = sum(m.attrs["cpe"].seconds + phase for m in nodes) - phase
    if op.seconds >= as_phases:
        return None
    for m, p in zip(nodes, plans):  # each member's slicing keeps its meaning at the fused block size
        if not _meaning_kept(m, p, op.block, op, target, graph.dtype, seen):
            log.info("%s: fusing %d steps changes a result at blocks of %d", nodes[0].source, len(nodes), op.block)
            return None
    attrs = {"cpe": op, "mpe_alt_s": sum(m.attrs["mpe_alt_s"] for m in nodes),
             "members": nodes, "extra_outputs": outs[1:]}
    return Node("cpe", ins, outs[0], attrs, f"fused({', '.join(m.relax_op for m in nodes)})", nodes[0].source)


def fuse_runs(graph: Graph, target: Target, same_call: SameCall | None = None) -> int:
    """Fuse the runs of consecutive tentative CPE steps that cut one way (``same_call``: and that one
    library call runs, tuner.aot.framework_style); returns the fused nodes made."""
    groups: list[tuple[list[Node], list[KernelPlan]]] = []
    run = _Run(graph, _Cuts(target, graph.dtype))
    for s in graph.steps:
        if not isinstance(s, Node):
            continue  # a note runs nothing: it does not break a run
        joins = same_call is None or not run.nodes or same_call(run.nodes[-1], s)
        if _fusable(s) and joins and run.admit(s):
            continue
        groups.append((run.nodes, run.plans))
        run.start(s if _fusable(s) else None)
    groups.append((run.nodes, run.plans))
    made = 0
    seen: dict[tuple[int, int], bool] = {}
    for nodes, plans in groups:
        fused = _fused(graph, run, nodes, plans, target, seen) if len(nodes) > 1 else None
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


def split(graph: Graph, n: Node) -> None:
    """A fused node the placement does not keep: its members, in order, in its place (each still a
    tentative CPE step, for the placement to put where it runs fastest)."""
    at = _position(graph, n)
    graph.steps[at:at + 1] = n.attrs["members"]
