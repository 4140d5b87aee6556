"""Element-wise epilogues fused into the GEMM-like kernel that produces their operand.

The only reader of a conv2d / dense / batch_matmul output runs inside that kernel, on each output
tile in LDM just before its DMA put, when it is
  * element-wise on that one operand (relu, relu6/clip, gelu, sigmoid, tanh, a scalar add, ...:
    whatever TVM legalizes to perfect element-wise loop nests, checked on the TIR by
    tuner.ir.cprint.epilogue.scalar_epilogue), or
  * a per-output-channel constant: a bias add (add/subtract/multiply/divide by a constant that varies
    only along the channel axis), e.g. a batch-norm's scale and shift. Its vectors (at most
    VECTOR_BYTES together) are fetched into LDM once per CPE at the kernel's start; the channel of
    each element follows from its address in the output (the put's destination).
Chains fuse link by link (bias add, then relu). A unary epilogue moves no data; channel vectors add
one small DMA get per vector and CPE, issued at the kernel's start and waited for at the first put,
so it overlaps the kernel's compute (both checked against the emulator's counts). Those leave the
tuned schedule valid, so the tuning-log key stays the GEMM's workload key; the generated kernel (and
its dedup key in slave.c) carries the epilogue.

A residual add or multiply (``add``/``multiply`` of the kernel's output and another activation of
the same shape) changes what the kernel moves: each output tile's operand tile is fetched by a DMA get
that mirrors the put (same length, blocks and gap) into an LDM buffer of one tile, then added or
multiplied. That is part of the workload (``epilogue="residual_add"`` / ``"residual_multiply"``: its
own key in the tuning log; its DMA, LDM and per-element work are in the analysis and simulator,
tuner/space/epilogue.py). The operand is passed to the kernel as ``p[RESIDUAL_SLOT]``. It must exist
before the kernel runs: in a backward pass the derivative a GEMM's result is multiplied by (relu's
mask ``sign(y)``, tanh's ``1 - y^2``) is computed from forward values after the GEMM; such a producer
moves to just before the kernel when everything it reads is ready there.

A GEMM-like expression operator (a derived conv data gradient, tuner.expr.autodiff) is a generic node
until the compiler finds it tuned (tuner.aot.kernels). It takes a residual stage only -- a backward
pass's relu mask multiplied into the data gradient -- under its own key (``ExprWorkload.epilogue``);
where that fused form is not tuned the compiler undoes the fusion (``unfuse``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

import numpy as np

from tuner.ir.cprint.epilogue import scalar_epilogue
from tuner.ir.cprint.legalized import Work
from tuner.ir.graph import Graph, Node, Note, Tensor, Where
from tuner.space.epilogue import RESIDUAL_ADD, RESIDUAL_EPILOGUES
from tuner.space.ops import geometry_for
from tuner.task_kind import kind_of
from tuner.workloads import Workload, with_epilogue

RESIDUAL_SLOT = 15  # swtune_args.p index of a residual operand (per-channel vectors count up from 0)
VECTOR_BYTES = 4096  # LDM for per-channel vectors: what the tuned kernels' budget leaves (64 KB - 56 KB)
_BIN = {"add": "({v} + {c})", "subtract": "({v} - {c})", "multiply": "({v} * {c})", "divide": "({v} / {c})"}
_BIN_REV = {"add": "({c} + {v})", "subtract": "({c} - {v})", "multiply": "({c} * {v})", "divide": "({c} / {v})"}

# the put of an output tile in a generated slave kernel (tuner.codegen.printer.SlavePrinter.put)
_C_DECL = re.compile(r"__thread_local\s+\w+\s+C_(?:ldm|buf)\[\d+\]\[(\d+)\]")  # C_buf: two copies (db_c)
_PUT = re.compile(r"^(?P<indent>\s*)SW_PUT\(&C_ldm\[0\]\[(?P<lo>[^\]]+)\], [^,]+, (?P<len>[^,]+), ")


@dataclass(frozen=True)
class Epilogue:
    name: str  # the fused operator(s), e.g. "nn.relu"
    stmts: tuple[str, ...]  # C statements on ``v`` (one output element; channel ``_ch``)
    result: str
    work: Work  # per element
    vectors: tuple[int, ...] = field(default=())  # lengths of the per-channel vectors (_ev0, _ev1, ...)
    residual: bool = False  # a stage reads ``_res[_ro + _q]``: the residual operand's tile (the kernel's last input)

    @property
    def key(self) -> str:
        return self.name + ":" + "".join(self.stmts) + repr(self.vectors) + ("+res" if self.residual else "")


def _channel_vector(c: Tensor, out_shape: tuple[int, ...], axis: int, channels: int) -> np.ndarray | None:
    """``c`` (a constant broadcast to ``out_shape``) as one value per channel, or None when it varies
    along another axis."""
    if c.kind != "const" or c.data is None or len(c.shape) > len(out_shape):
        return None
    full = (1,) * (len(out_shape) - len(c.shape)) + tuple(c.shape)
    if any(d != 1 for i, d in enumerate(full) if i != axis) or full[axis] not in (1, channels):
        return None
    return np.broadcast_to(c.data.reshape(full).reshape(-1), (channels,)).copy()


def _binary_op(u: Node) -> str | None:
    """The arithmetic operator (a key of ``_BIN``) a step computes: its Relax operator's, or, for a
    step of a larger one (a batch_norm's multiply and add), the operator of its own call."""
    own = getattr(getattr(u.attrs.get("relax_call"), "op", None), "name", "")
    for op in (u.relax_op, str(own).removeprefix("relax.")):
        if op in _BIN:
            return op
    return None


def _channel_stage(graph: Graph, k: Node, u: Node, stage: int, src: str, nvec: int
                   ) -> tuple[list[str], str, Work, list[Tensor]] | None:
    """A per-channel constant epilogue stage (bias add, a batch norm's scale or shift) of kernel ``k``."""
    out = k.output
    try:
        axis = channel_axis(k.attrs["workload"])  # the output dim the op's col axis indexes
    except ValueError:  # no single output-channel axis: nothing is per channel
        return None
    shape = u.output.shape
    if axis == len(out.shape) - 1 and shape and shape[-1] == out.shape[-1]:
        axis = len(shape) - 1  # a row-major view of a dense / batch_matmul output keeps its last axis
    elif shape != out.shape:
        return None
    channels = shape[axis]
    res = f"_e{stage}_0"
    op = _binary_op(u)
    if u.op != "tir" or op is None or len(u.inputs) != 2:
        return None
    which = 0 if u.inputs[0].root is out.root else 1
    if u.inputs[which].root is not out.root or u.inputs[1 - which].root is out.root:
        return None
    vec = _channel_vector(u.inputs[1 - which], shape, axis, channels)
    if vec is None:
        return None
    expr = (_BIN if which == 0 else _BIN_REV)[op].format(v=src, c=f"_ev{nvec}[_ch]")
    work = Work(0, 1, 1, 1 if op == "divide" else 0)
    tensors = [graph.new_const(vec.astype(graph.dtype), f"{u.source}.channel")]
    return [f"const SWTUNE_EPT {res} = {expr};"], res, work, tensors


def _residual_stage(graph: Graph, k: Node, u: Node, stage: int, src: str, prev: Epilogue | None
                    ) -> tuple[list[str], str, Work, Tensor, str] | None:
    """A residual add or multiply of kernel ``k``'s output: (statements, result, work, the other
    operand, the workload's epilogue)."""
    w = producer_workload(k)
    out = k.output.root
    epilogue = RESIDUAL_EPILOGUES.get(_binary_op(u) or "")
    if (u.op != "tir" or epilogue is None or len(u.inputs) != 2 or (prev is not None and prev.residual)
            or getattr(w, "epilogue", "none") != "none" or kind_of(w).memory_bound(w)):
        return None
    a, b = u.inputs
    if not (a.shape == b.shape == u.output.shape) or (a.root is out) == (b.root is out):
        return None
    other = b if a.root is out else a
    if other.root.kind == "const":
        return None
    try:
        with_epilogue(w, epilogue)
    except (TypeError, ValueError):
        return None
    if other.root.kind == "temp" and not _ready_before(graph, other, k):
        return None
    sign = "+" if epilogue == RESIDUAL_ADD else "*"
    # its work and DMA are the workload's (tuner/space/epilogue.py): nothing to add in tuner.aot.timing
    return ([f"const SWTUNE_EPT _e{stage}_0 = ({src} {sign} _res[_ro + _q]);"], f"_e{stage}_0", Work(0, 0, 0, 0),
            other, epilogue)


def _ready_before(graph: Graph, t: Tensor, k: Node) -> bool:
    """Whether temp ``t`` is computed before kernel ``k`` runs, moving the nodes that compute it to just
    before ``k`` (in their order) when they run later but read only what is ready there -- a backward
    pass's derivative of forward values, e.g. tanh's 1 - y*y, two nodes -- and nothing else in
    between writes what they read. Only element-wise (``tir``) nodes move: a GEMM computed later (a
    ResNet's downsample conv, a derived data gradient) keeps its place and takes the residual add itself."""
    nodes = graph.nodes
    at = next(i for i, n in enumerate(nodes) if n is k)
    later = nodes[at:]  # the kernel and what follows it
    writer = {o.root.id: n for n in later for o in n.outputs}
    needed: set[int] = set()  # ids of the nodes that compute it
    pending = [t.root.id]
    while pending:
        n = writer.get(pending.pop())
        if n is None:
            continue  # ready before the kernel
        if n is k or n.op != "tir" or gemm_expression(n):
            return False  # it depends on the kernel's own result, or on another kernel (left in place)
        if id(n) not in needed:
            needed.add(id(n))
            pending += [i.root.id for i in n.inputs]
    if not needed:
        return True
    chain = [n for n in later if id(n) in needed]  # program order
    others = [n for n in later[:later.index(chain[-1])] if id(n) not in needed]
    written = {o.root.id for n in others for o in n.outputs}
    touched = written | {i.root.id for n in others for i in n.inputs}
    if any(i.root.id in written for n in chain for i in n.inputs) or any(
            o.root.id in touched for n in chain for o in n.outputs):
        return False
    for n in chain:
        graph.steps.remove(n)
    place = graph.steps.index(k)
    graph.steps[place:place] = chain
    return True


@dataclass
class Unfused:
    """What fusing a residual stage into an expression operator changed, to undo it where its fused
    form is not tuned (tuner.aot.kernels: a generic node cannot run the epilogue): the node's inputs,
    output and workload before, the consumer it took in, and the note standing in the consumer's place."""

    inputs: list[Tensor]
    output: Tensor
    workload: Workload
    consumer: Node
    note: Note | None = None


def gemm_expression(n: Node) -> bool:
    """Whether ``n`` is a generic node that becomes a GEMM-like expression kernel when tuned (a
    derived conv gradient, a matmul of any rank)."""
    w = n.attrs.get("expr_workload")
    return n.op == "tir" and w is not None and not kind_of(w).memory_bound(w)


def producer_workload(k: Node) -> Workload:
    """The workload of a kernel node, or of a GEMM-like expression node (``gemm_expression``)."""
    return k.attrs["workload"] if k.op == "kernel" else k.attrs["expr_workload"]


def unfuse(k: Node) -> Node:
    """Undo the fusion of expression node ``k`` (its fused form has no tuned config); returns the
    consumer, to run right after it (its other operand is ready before ``k``: ``_ready_before``)."""
    un: Unfused = k.attrs.pop("unfused")
    k.inputs, k.output = un.inputs, un.output
    k.attrs["expr_workload"] = un.workload
    for fused_attr in ("epilogue", "fused"):
        k.attrs.pop(fused_attr, None)
    return un.consumer


def readers_by_root(graph: Graph) -> dict[int, list[Node]]:
    """The nodes that read each tensor (by its root: a view's reader reads its base), in program order."""
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for t in n.inputs:
            out.setdefault(t.root.id, []).append(n)
    return out


def fuse_epilogues(graph: Graph, ctype: str) -> int:
    """Fuse every fusable element-wise consumer into its kernel; returns how many were fused. A
    GEMM-like expression operator (``gemm_expression``) takes a residual add or multiply only (one
    stage, recorded in ``Unfused`` so the compiler can undo it: it is a kernel only when tuned)."""
    readers = readers_by_root(graph)
    outputs = {t.root.id for t in graph.outputs}
    fused = 0
    removed: dict[int, Unfused | None] = {}
    for k in graph.nodes:
        expression = k.op != "kernel" and gemm_expression(k)
        if k.op != "kernel" and not expression:
            continue
        while True:  # a chain (e.g. scale then gelu) fuses one link at a time
            out = k.output.root
            users = readers.get(out.id, [])
            if len(users) != 1 or out.id in outputs:
                break
            u = users[0]
            if len(u.outputs) != 1 or u.output.size != out.size:
                break
            prev: Epilogue | None = k.attrs.get("epilogue")
            stage = 0 if prev is None else prev.stmts.count("/* stage */") + 1
            src = "v" if prev is None else prev.result
            nvec = 0 if prev is None else len(prev.vectors)
            vectors: list[Tensor] = []
            got = None
            scalars = {i: float(t.data.reshape(-1)[0]) for i, t in enumerate(u.inputs)
                       if t.kind == "const" and t.data is not None and t.size == 1}
            operand = [i for i, t in enumerate(u.inputs) if t.root is out]
            residual: Tensor | None = None
            if u.op == "tir" and len(operand) == 1 and len(u.inputs) == 1 + len(scalars) and not expression:
                got = scalar_epilogue(u.attrs["prim_func"], u.attrs["function"], ctype, src, f"_e{stage}_",
                                      operand[0], scalars)
            residual_epilogue = "none"
            if got is None:
                res = _residual_stage(graph, k, u, stage, src, prev)
                if res is not None:
                    *got, residual, residual_epilogue = res  # type: ignore[assignment]
            if got is None:
                channel = None if expression else _channel_stage(graph, k, u, stage, src, nvec)
                if channel is None:
                    break
                *got, vectors = channel  # type: ignore[assignment]
                item = 8 if ctype == "double" else 4
                if ((sum(prev.vectors) if prev else 0) + sum(t.size for t in vectors)) * item > VECTOR_BYTES:
                    break
            stmts, result, work = got  # type: ignore[misc]
            before = Unfused(list(k.inputs), k.output, producer_workload(k), u) if expression else None
            if prev is not None:  # a chain: this stage reads the previous stage's result
                stmts = [*prev.stmts, "/* stage */", *stmts]
                work = Work(0, prev.work.loads + work.loads, prev.work.arith + work.arith,
                            prev.work.transcendental + work.transcendental)
            has_res = bool(prev and prev.residual)
            if has_res:  # the residual operand stays the kernel's last input
                k.inputs = [*k.inputs[:-1], *vectors, k.inputs[-1]]
            else:
                k.inputs = [*k.inputs, *vectors]
            if residual is not None:
                k.inputs = [*k.inputs, residual]
                k.attrs["expr_workload" if expression else "workload"] = with_epilogue(producer_workload(k),
                                                                                       residual_epilogue)
                if before is not None:
                    k.attrs["unfused"] = before
            lens = (*(prev.vectors if prev else ()), *(t.size for t in vectors))
            # the chain's operators by name, once for steps of one binding (a batch_norm's multiply and add)
            same_binding = prev is not None and k.attrs["fused"][-1] == u.source
            name = u.relax_op if prev is None else prev.name if same_binding else f"{prev.name}+{u.relax_op}"
            k.attrs["epilogue"] = Epilogue(name, tuple(s.replace("SWTUNE_EPT", ctype) for s in stmts), result,
                                           work, lens, has_res or residual is not None)
            removed[id(u)] = before
            k.output = u.output  # the kernel now writes the consumer's tensor (same size, flat)
            k.attrs["fused"] = [*k.attrs.get("fused", []), u.source]
            fused += 1
            readers = readers_by_root(Graph(graph.inputs, graph.outputs,
                                     [s for s in graph.steps if not (isinstance(s, Node) and id(s) in removed)],
                                     graph.dtype))
            if expression:
                break  # one stage: what Unfused restores
    steps: list[Node | Note] = []
    for s in graph.steps:
        if isinstance(s, Node) and id(s) in removed:
            note = Note(s.source, s.relax_op, Where.FUSED_EPILOGUE, "applied to the kernel's output tile in LDM")
            undo = removed[id(s)]
            if undo is not None:
                undo.note = note
            steps.append(note)
        else:
            steps.append(s)
    graph.steps = steps
    return fused


def _block_end(lines: list[str], start: int) -> int:
    """The index of the line closing the ``{`` block that line ``start`` opens (by indentation)."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    return next(i for i in range(start + 1, len(lines))
                if lines[i].strip() == "}" and len(lines[i]) - len(lines[i].lstrip()) == indent)


def _prefetch_residual(slave: str) -> str:
    """Issue the gets of a tile's residual operand when the tile starts -- right after its output box
    (``c_ok[0]``) is known, under the same guard as the put -- into ``_res`` laid out as the output tile,
    so they run under the tile's compute; ``apply_epilogue`` waits for them at the put. The printer
    emits one output box and one put block per kernel (SlavePrinter.put); anything else is refused."""
    lines = slave.splitlines()
    box = [i for i, ln in enumerate(lines) if ln.strip().startswith("c_ok[0] =")]
    blocks = [i for i, ln in enumerate(lines) if ln.strip() == "if (c_ok[0]) {"]
    if len(box) != 1 or len(blocks) != 1 or blocks[0] < box[0]:
        raise ValueError("a residual epilogue needs one output box and one put block in the kernel")
    start, end = blocks[0], _block_end(lines, blocks[0])
    guard = lines[start - 1].strip()
    guarded = guard.startswith("if (") and guard.endswith("{") and "c_ok" not in guard
    if guarded:
        start, end = start - 1, _block_end(lines, start - 1)
    gets = []
    for ln in lines[start:end + 1]:
        m = _PUT.match(ln)
        if ln.strip().startswith("SW_WAIT(&c_reply"):
            continue
        if m is not None:
            a = [x.strip() for x in ln[ln.index("SW_PUT(") + 7:].split(",")]
            ln = (f"{m.group('indent')}SW_GET(_arg->p[{RESIDUAL_SLOT}] + (({a[1]}) - _arg_c), &_res[{m.group('lo')}], "
                  f"{a[2]}, {a[3]}, {a[4]}, &_res_reply[0]); _res_n++;  /* the residual operand's tile */")
        gets.append(ln)
    return "\n".join([*lines[:box[0] + 1], *gets, *lines[box[0] + 1:]]) + ("\n" if slave.endswith("\n") else "")


def channel_axis(workload: Workload) -> int:
    """The output dimension a fused per-channel vector (bias, scale) runs along: the one the op's
    col axis indexes (the weights' output channel: a conv's k, a GEMM's n; tuner/space/ops.py)."""
    geo = geometry_for(workload)
    if len(geo.col_axes) != 1:
        raise ValueError(f"{workload.key}: no single output-channel axis for a fused epilogue ({geo.col_axes})")
    return next(i for i, d in enumerate(geo.expr.output.dims) if geo.col_axes[0] in dict(d.coefs))


def apply_epilogue(slave: str, ep: Epilogue, ctype: str, c_shape: tuple[int, ...], pitch: int, axis: int) -> str:
    """Insert the epilogue before every output-tile put of a generated slave kernel (and, for
    per-channel vectors, their LDM copies and the DMA that fills them at the kernel's start).
    ``c_shape``/``pitch``: the kernel's output buffer (rows padded to ``pitch``); ``axis``: its channel axis."""
    from tuner.codegen.printer import KERNEL

    last = len(c_shape) - 1
    if axis == last:
        channel = f"_d % {pitch}L"
    else:
        inner = pitch * prod(c_shape[axis + 1:last])
        channel = f"(_d / {inner}L) % {c_shape[axis]}L"
    if ep.residual:
        slave = _prefetch_residual(slave)
    lines, count = [], 0
    decls = [f"__thread_local {ctype} _ev{j}[{n}];" for j, n in enumerate(ep.vectors)]
    if ep.vectors:
        decls.append("__thread_local volatile SW_REPLY_T _ev_reply[1];")
    if ep.residual:  # one output tile copy of the residual operand
        tile = _C_DECL.search(slave)
        if tile is None:
            raise ValueError("no output tile buffer found in the generated kernel")
        decls += [f"__thread_local {ctype} _res[{tile.group(1)}] __attribute__((aligned(64)));",
                  "__thread_local volatile SW_REPLY_T _res_reply[1];"]
    sig = f"void {KERNEL}(swtune_args *_arg) {{"
    for line in slave.splitlines():
        if decls and line.startswith("__thread_local") and count == 0:
            lines += decls
            decls = []
        m = _PUT.match(line)
        if m is not None:
            ind = m.group("indent")
            body = " ".join(ep.stmts)
            pos = ""
            if ep.vectors:
                dst = line[line.index("_arg_c"):].split(",")[0]
                args = [a.strip() for a in line[line.index("SW_PUT(") + 7:].split(",")]
                bs, gp = args[3], args[4]
                pos = (f"const long _bsE = ({bs}) / (long)sizeof({ctype}), "
                       f"_stE = (({bs}) + ({gp})) / (long)sizeof({ctype}); "
                       f"const long _d = (long)(({dst}) - _arg_c) + (_bsE ? (_q / _bsE) * _stE + _q % _bsE : _q); "
                       f"const long _ch = {channel}; if (_ch >= {c_shape[axis]}L) continue; ")
                lines.append(f"{ind}if (!_ev_ready) {{ SW_WAIT(&_ev_reply[0], {len(ep.vectors)}); _ev_ready = 1; }}")
            if ep.residual:  # the operand's tile, fetched when the tile started (_prefetch_residual)
                lines.append(f"{ind}SW_WAIT(&_res_reply[0], _res_n);")
                pos = f"const long _ro = {m.group('lo')}; " + pos
            lines.append(f"{ind}for (long _q = 0; _q < (long)(({m.group('len')}) / sizeof({ctype})); _q++) "
                         f"{{ {ctype} *const _p = &C_ldm[0][{m.group('lo')}] + _q; {pos}const {ctype} v = *_p; "
                         f"{body} *_p = {ep.result}; }}  /* fused epilogue: {ep.name} */")
            count += 1
        lines.append(line)
        if ep.residual and line.strip() == sig:
            lines.append("  _res_reply[0] = 0; int _res_n = 0;")
        if ep.vectors and line.strip() == sig:
            lines.append("  _ev_reply[0] = 0;")
            lines += [f"  SW_GET(_arg->p[{j}], _ev{j}, {n} * sizeof({ctype}), 0, 0, &_ev_reply[0]);"
                      for j, n in enumerate(ep.vectors)]
            lines.append("  int _ev_ready = 0;  "
                         "/* the vectors arrive while the kernel computes; waited for at the first put */")
    if count == 0:
        raise ValueError("no output-tile put found in the generated kernel")
    return "\n".join(lines) + ("\n" if slave.endswith("\n") else "")
