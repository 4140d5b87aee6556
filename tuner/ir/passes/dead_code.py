"""Dead code: a node nothing reads is removed, and reported as removed.

Exports leave such nodes behind (the ``zeros_like`` torch's max_pool2d export computes and drops), and
so do the other passes (a runtime transpose whose operand a matmul kernel reads directly). Walking the
steps backwards from the model's outputs keeps every node whose output (or a view of it) is read by a
kept node or is an output; each other node becomes a ``Where.REMOVED`` note under its binding.
"""

from __future__ import annotations

from tuner.ir.graph import Node, Note, Tensor, Where
from tuner.ir.passes.lowering_pass import LoweringPass


def remove_dead_code(steps: list[Node | Note], outputs: list[Tensor]) -> list[Node | Note]:
    """``steps`` with each node nothing reads replaced by a note that it was removed."""
    used = {t.root.id for t in outputs}
    keep: list[Node | Note] = []
    for s in reversed(steps):
        if isinstance(s, Node) and not any(o.id in used for o in s.outputs):
            keep.append(Note(s.source, s.relax_op, Where.REMOVED))
            continue
        if isinstance(s, Node):
            used.update(t.root.id for t in s.inputs)
        keep.append(s)
    return keep[::-1]


PASS = LoweringPass("dead_code", steps=remove_dead_code)
