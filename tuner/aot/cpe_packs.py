"""One runtime pack per tensor and layout: a GEMM kernel's operand packed again for each call is packed once.

A tuned kernel with the pack knob reads an operand stored tile after tile (tuner.aot.kernels: a
``pack_b`` step before each call, the operand's transpose composed into it). A recurrent cell's weight
is read by the same kernel at every unrolled time step (MI-LSTM's ``dh = dpre @ U``, four times a
step), and each call packed it again: the same permutation of the same tensor, a copy on the MPE
(256 KB in 49 us there, 138 us as a CPE kernel of its own at the model's DMA rates). The graph's
tensors are written once (a Relax dataflow), so a later pack of the same source in the same permutation
holds the same values: its readers read the first one's copy, and it leaves the steps. Applied to every
program alike, framework-style included (a stronger reference: its library calls reuse a packed
weight, as a library's packed-GEMM API would let them).
"""

from __future__ import annotations

from tuner.ir.graph import Graph, Node, Note, Tensor, Where


def share_packs(graph: Graph) -> int:
    """Replace each ``pack_b`` step that repeats an earlier one (same source tensor, same shape and axes,
    the source not written in between) by a note, its readers reading the earlier copy; returns how
    many went."""
    first: dict[tuple[int, tuple[int, ...], tuple[int, ...]], Node] = {}
    renamed: dict[int, Tensor] = {}  # a dropped pack's output id -> the copy its readers read instead
    steps: list[Node | Note] = []
    dropped = 0
    for s in graph.steps:
        if not isinstance(s, Node):
            steps.append(s)
            continue
        s.inputs = [renamed.get(t.id, t) for t in s.inputs]
        if s.op == "pack_b":
            src = s.inputs[0]
            key = (src.id, tuple(s.attrs["shape"]), tuple(s.attrs["axes"]))
            earlier = first.get(key)
            if earlier is not None and earlier.output.size == s.output.size:
                renamed[s.output.id] = earlier.output
                steps.append(Note(s.source, s.relax_op, Where.REMOVED,
                                  f"pack_b of {src.name} shared with {earlier.source}'s (the same layout)"))
                dropped += 1
                continue
            first[key] = s
        # a step writing a tensor a pack read makes later packs of it new ones
        written = {t.root.id for t in s.outputs}
        for key in [k for k, p in first.items() if p.inputs[0].root.id in written and p is not s]:
            del first[key]
        steps.append(s)
    graph.steps = steps
    graph.outputs = [renamed.get(t.id, t) for t in graph.outputs]
    return dropped
