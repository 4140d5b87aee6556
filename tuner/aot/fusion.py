"""Element-wise epilogues fused into the GEMM-like kernel that produces their operand.

A generic node that is element-wise on one operand (relu, relu6/clip, gelu, sigmoid, tanh, silu, a
scalar add/multiply, ...: whatever TVM legalizes to perfect element-wise loop nests, checked on the
TIR by tuner.aot.tir_c.scalar_epilogue) and is the only reader of a conv2d / dense / batch_matmul
output runs inside that kernel: on each output tile in LDM, just before its DMA put. Being
position-independent and reading nothing else, it moves no extra data: the kernel's DMA is the
unfused kernel's (tested against the emulator's counts), and its tuned schedule stays valid, so the
tuning-log key stays the GEMM's workload key; the generated kernel (and its dedup key in slave.c)
carries the epilogue. Epilogues with a second operand (bias add, batch-norm scale/shift, residual
add) are not fused yet: they need the operand's tile DMA in the kernel's space and analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.aot.graph import Graph, Node, Note
from tuner.aot.tir_c import Work, scalar_epilogue

# the put of an output tile in a generated slave kernel (tuner.codegen.printer.SlavePrinter.put)
_PUT = re.compile(r"^(?P<indent>\s*)SW_PUT\(&C_ldm\[0\]\[(?P<lo>[^\]]+)\], [^,]+, (?P<len>[^,]+), ")


@dataclass(frozen=True)
class Epilogue:
    name: str  # the fused operator(s), e.g. "nn.relu"
    stmts: tuple[str, ...]  # C statements on ``v`` (one output element)
    result: str
    work: Work  # per element

    @property
    def key(self) -> str:
        return self.name + ":" + "".join(self.stmts)


def _readers(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for t in n.inputs:
            out.setdefault(t.root.id, []).append(n)
    return out


def fuse_epilogues(graph: Graph, ctype: str) -> int:
    """Fuse every fusable element-wise consumer into its kernel; returns how many were fused."""
    readers = _readers(graph)
    outputs = {t.root.id for t in graph.outputs}
    fused = 0
    removed: set[int] = set()
    for k in graph.nodes:
        if k.op != "kernel":
            continue
        while True:  # a chain (e.g. scale then gelu) fuses one link at a time
            out = k.output.root
            users = readers.get(out.id, [])
            if len(users) != 1 or out.id in outputs:
                break
            u = users[0]
            if u.op != "tir" or len(u.inputs) != 1 or len(u.outputs) != 1 or u.output.size != out.size:
                break
            prev: Epilogue | None = k.attrs.get("epilogue")
            stage = 0 if prev is None else prev.stmts.count("/* stage */") + 1
            got = scalar_epilogue(u.attrs["prim_func"], u.attrs["function"], ctype,
                                  "v" if prev is None else prev.result, f"_e{stage}_")
            if got is None:
                break
            stmts, result, work = got
            if prev is not None:  # a chain: this stage reads the previous stage's result
                stmts = [*prev.stmts, "/* stage */", *stmts]
                work = Work(0, prev.work.loads + work.loads, prev.work.arith + work.arith,
                            prev.work.transcendental + work.transcendental)
            name = u.relax_op if prev is None else f"{prev.name}+{u.relax_op}"
            k.attrs["epilogue"] = Epilogue(name, tuple(stmts), result, work)
            removed.add(id(u))
            k.output = u.output  # the kernel now writes the consumer's tensor (same size, flat)
            k.attrs["fused"] = [*k.attrs.get("fused", []), u.source]
            fused += 1
            readers = _readers(Graph(graph.inputs, graph.outputs,
                                     [s for s in graph.steps if not (isinstance(s, Node) and id(s) in removed)],
                                     graph.dtype))
    steps: list[Node | Note] = []
    for s in graph.steps:
        if isinstance(s, Node) and id(s) in removed:
            steps.append(Note(s.source, s.relax_op, "fused epilogue", "applied to the kernel's output tile in LDM"))
        else:
            steps.append(s)
    graph.steps = steps
    return fused


def apply_epilogue(slave: str, ep: Epilogue, ctype: str) -> str:
    """Insert the epilogue before every output-tile put of a generated slave kernel."""
    lines, count = [], 0
    for line in slave.splitlines():
        m = _PUT.match(line)
        if m is not None:
            ind = m.group("indent")
            body = " ".join(ep.stmts)
            lines.append(f"{ind}for (long _q = 0; _q < (long)(({m.group('len')}) / sizeof({ctype})); _q++) "
                         f"{{ {ctype} *const _p = &C_ldm[0][{m.group('lo')}] + _q; const {ctype} v = *_p; "
                         f"{body} *_p = {ep.result}; }}  /* fused epilogue: {ep.name} */")
            count += 1
        lines.append(line)
    if count == 0:
        raise ValueError("no output-tile put found in the generated kernel")
    return "\n".join(lines) + ("\n" if slave.endswith("\n") else "")
