"""The model's constants in one binary file (weights.bin) and their offsets for the generated header.

Every constant a node reads is stored once, little-endian, in the model dtype, each starting on a
128-byte boundary (a DMA line: the kernels read weights straight from this buffer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.ir.graph import Graph

ALIGN = 128


@dataclass
class WeightsLayout:
    offset_of: dict[int, int]  # const tensor id -> offset in elements
    names: dict[int, str]  # const tensor id -> C macro of its offset
    total_bytes: int


def write_weights(graph: Graph, path: str | Path) -> WeightsLayout:
    itemsize = np.dtype(graph.dtype).itemsize
    offset_of: dict[int, int] = {}
    names: dict[int, str] = {}
    pos = 0
    with open(path, "wb") as fh:
        for i, t in enumerate(graph.consts()):
            assert t.data is not None
            data = np.ascontiguousarray(t.data, dtype=np.dtype(graph.dtype).newbyteorder("<"))
            pad = (-pos) % ALIGN
            fh.write(b"\0" * pad)
            pos += pad
            offset_of[t.id] = pos // itemsize
            names[t.id] = f"SWTUNE_W{i}"
            fh.write(data.tobytes())
            pos += data.nbytes
        pad = (-pos) % ALIGN
        fh.write(b"\0" * pad)
        pos += pad
    return WeightsLayout(offset_of, names, pos)


def weights_header_lines(graph: Graph, layout: WeightsLayout) -> list[str]:
    lines = [f"#define SWTUNE_WEIGHTS_BYTES {layout.total_bytes}L"]
    for t in graph.consts():
        lines.append(f"#define {layout.names[t.id]} {layout.offset_of[t.id]}L  /* {t.name} {list(t.shape)} */")
    return lines
