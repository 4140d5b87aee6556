"""Storage of the intermediate tensors: a few reused buffers ("slots") instead of one per tensor.

Liveness over the node order: a temp is live from the node that writes it to the last node that
reads it (or its views); the model outputs stay live to the end. A freed slot is reused by a later
temp (best fit, grown if needed), never by the output of the node that frees it, so no operator
writes over its own input.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.ir.graph import Graph


@dataclass
class MemoryPlan:
    slot_of: dict[int, int]  # root tensor id -> slot
    slot_elems: list[int]  # size of each slot in elements

    @property
    def total_elems(self) -> int:
        return sum(self.slot_elems)


def plan_memory(graph: Graph) -> MemoryPlan:
    nodes = graph.nodes
    end = len(nodes)
    last: dict[int, int] = {}
    for i, n in enumerate(nodes):
        for t in n.inputs:
            last[t.root.id] = i
    for t in graph.outputs:
        last[t.root.id] = end
    slot_of: dict[int, int] = {}
    sizes: list[int] = []
    free: list[int] = []
    for i, n in enumerate(nodes):
        for out in n.outputs:
            need = out.size
            fits = [s for s in free if sizes[s] >= need]
            if fits:
                s = min(fits, key=lambda s: sizes[s])
            elif free:
                s = max(free, key=lambda s: sizes[s])
                sizes[s] = need
            else:
                s = len(sizes)
                sizes.append(need)
            if s in free:
                free.remove(s)
            slot_of[out.id] = s
        # free after the outputs are placed: an operator never writes over its own inputs
        for tid in {t.root.id for t in n.inputs}:
            if tid in slot_of and last.get(tid) == i:
                free.append(slot_of[tid])
        for out in n.outputs:
            if last.get(out.id, -1) < i:  # written but never read (an unused output of a split)
                free.append(slot_of[out.id])
    return MemoryPlan(slot_of, [max(1, x) for x in sizes])
