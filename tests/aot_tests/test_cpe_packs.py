"""A runtime pack repeated for each call of a kernel is made once (tuner.aot.cpe_packs)."""

from __future__ import annotations

from tuner.aot.cpe_packs import share_packs
from tuner.ir.graph import Graph, Node, Note, Tensor, Where

SHAPE, AXES = (2, 4, 2, 4), (0, 2, 1, 3)


def _t(i: int, shape: tuple[int, ...], kind: str = "temp") -> Tensor:
    return Tensor(i, shape, "float32", kind, f"t{i}")


def _pack(src: Tensor, out: Tensor, axes: tuple[int, ...] = AXES) -> Node:
    return Node("pack_b", [src], out, {"shape": SHAPE, "axes": axes}, "matmul", f"pack{out.id}")


def test_a_weight_packed_for_each_call_is_packed_once_and_every_call_reads_that_copy():
    w, a = _t(0, (8, 8), "input"), _t(1, (4, 8), "input")
    p1, p2, p3 = (_t(i, (64,)) for i in (2, 3, 4))
    y1, y2, y3 = (_t(i, (4, 8)) for i in (5, 6, 7))
    steps = [_pack(w, p1), Node("kernel", [a, p1], y1), _pack(w, p2), Node("kernel", [y1, p2], y2),
             _pack(w, p3, (2, 0, 3, 1)), Node("kernel", [y2, p3], y3)]
    graph = Graph([w, a], [y3], list(steps), "float32")
    assert share_packs(graph) == 1
    assert [s.op for s in graph.nodes] == ["pack_b", "kernel", "kernel", "pack_b", "kernel"]
    assert graph.nodes[2].inputs[1] is p1  # the second call reads the first pack
    assert graph.nodes[4].inputs[1] is p3  # another layout is a pack of its own
    (note,) = [s for s in graph.steps if isinstance(s, Note)]
    assert note.where == Where.REMOVED and "shared with pack2" in note.detail


def test_a_source_written_between_two_packs_is_packed_again():
    w, a = _t(0, (8, 8), "input"), _t(1, (4, 8), "input")
    p1, p2 = _t(2, (64,)), _t(3, (64,))
    view = Tensor(4, (64,), "float32", "temp", "w_flat", base=w)  # a step writing w's storage
    steps = [_pack(w, p1), Node("kernel", [a, p1], _t(5, (4, 8))), Node("copy", [a], view), _pack(w, p2)]
    graph = Graph([w, a], [p2], list(steps), "float32")
    assert share_packs(graph) == 0 and len(graph.nodes) == 4
