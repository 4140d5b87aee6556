"""How a scheduled kernel's operands move along the lanes of a vector loop.

A vector loop (annotated ``swtune.simd`` = lanes) runs ``w`` consecutive iterations of its variable.
An operand is contiguous along them when the variable appears only in its innermost LDM index with
step 1 (``unit_stride``); one strided along them is repacked after its fetch with the lanes'
dimension innermost when it can be (``gathered_dims``), else gathered lane by lane.
"""

from __future__ import annotations

import random
from typing import Any

from tuner.ir.tir import const_int, evaluate, free_vars, kind

_LANE_SPAN = 17  # consecutive loop values an index is checked over: every vector width (<= 16 lanes) and more


def unit_stride(load_indices: list, var: str, shape: list[int] | None = None) -> bool:
    """The loop var appears only in the innermost index, with step 1. With the buffer's ``shape``,
    trailing dimensions of extent 1 (a 1x1 conv's r, s) do not count: the lanes are contiguous in
    LDM as they are for the analysis (tuner/space/ops.py inner_access), so no repacked copy is needed."""
    if shape is not None:
        n = len(load_indices)
        while n > 1 and shape[n - 1] == 1:
            n -= 1
        load_indices = list(load_indices[:n])
    if any(var in free_vars(i) for i in load_indices[:-1]):
        return False
    return step(load_indices[-1], var) == 1


def step(index: Any, var: str) -> int | None:
    """How far ``index`` moves when ``var`` grows by one (None: not affine in it). Checked over
    consecutive values of ``var`` from several starts, the other variables random: an index such as
    ``(4*t + x) // 2`` looks affine between two chosen points but steps 0, 1, 0, 1 along the lanes
    (a grouped conv's group index), and lanes of it are not one contiguous vector."""
    names = sorted(free_vars(index))
    rnd = random.Random(1)
    found = None
    for _ in range(4):
        env = {n: rnd.randrange(0, 7) for n in names}
        start = rnd.randrange(0, 7)
        values = []
        for x in range(start, start + _LANE_SPAN):
            env[var] = x
            values.append(evaluate(index, env))
        for d in (b - a for a, b in zip(values, values[1:])):
            if found is not None and d != found:
                return None
            found = d
    return found


def guarded_store(node: Any) -> tuple[Any, Any] | None:
    """(predicate or None, store) of a loop whose body is one store, optionally under TVM's bound
    predicate (an ``if`` without ``else``); None for any other body."""
    body, cond = node.body, None
    if kind(body) == "IfThenElse" and body.else_case is None:
        cond, body = body.condition, body.then_case
    if kind(body) != "BufferStore":
        return None
    if cond is not None and kind(cond) == "IntImm":
        cond = None
    return cond, body


def update_body(node: Any) -> tuple[Any, Any, list] | None:
    """(predicate or None, store, [operand loads]) of a loop body ``c = c + x * y``, else None."""
    found = guarded_store(node)
    if found is None:
        return None
    cond, body = found
    val = body.value
    if kind(val) != "Add" or kind(val.b) != "Mul" or kind(val.a) != "TensorLoad":
        return None
    ops = [val.b.a, val.b.b]
    if any(kind(o) != "TensorLoad" for o in ops) or val.a.source.name != body.buffer.name:
        return None
    return cond, body, ops


def gathered_dims(func_body: Any, roles: dict[str, str]) -> dict[str, int]:
    """Role -> LDM box dimension of each operand a vector loop reads strided along its lanes.

    Such an operand is repacked after its fetch into an LDM copy with that dimension innermost
    (``{R}_pk``, the packing tuner/space/analysis.py charges), so the loop reads whole vectors. Only
    an operand whose lanes run along one dimension with step 1 can be repacked so; any other stays
    gathered lane by lane."""
    out: dict[str, int] = {}
    bad: set[str] = set()

    def walk(node: Any) -> None:
        k = kind(node)
        if k == "SeqStmt":
            for x in node.seq:
                walk(x)
            return
        if k == "IfThenElse":
            walk(node.then_case)
            if node.else_case is not None:
                walk(node.else_case)
            return
        if k in ("AttrStmt", "LetStmt", "DeclBuffer", "AllocBuffer"):
            if hasattr(node, "body"):
                walk(node.body)
            return
        if k != "For":
            return
        if int(dict(node.annotations).get("swtune.simd", 1)) <= 1:
            walk(node.body)
            return
        up = update_body(node)
        if up is None:
            return
        var = node.loop_var.name
        for load in up[2]:
            idx = list(load.indices)
            dims = [d for d, i in enumerate(idx) if var in free_vars(i)]
            role = roles.get(load.source.name)
            if not dims or unit_stride(idx, var, [const_int(e) for e in load.source.shape]) or role is None:
                continue
            if len(dims) == 1 and step(idx[dims[0]], var) == 1 and out.get(role, dims[0]) == dims[0]:
                out[role] = dims[0]
            else:
                bad.add(role)

    walk(func_body)
    return {r: d for r, d in out.items() if r not in bad}


def conjuncts(cond: Any) -> list:
    """The terms of a predicate ``a && b && ...``."""
    if kind(cond) == "And":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]
