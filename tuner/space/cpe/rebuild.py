"""A memory-bound operator rebuilt from the TVMScript of its one-operator Relax module, the identity
of a CPE kernel task (tuner.space.cpe.workload): a worker, a compile and the tuning log all rebuild the
same node from the same text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from tuner.ir.cprint.legalized import Work
from tuner.ir.graph import Node


def module_text(mod: Any) -> str:
    """A module's TVMScript without comment lines: the canonical text of a workload."""
    text = mod.script(show_meta=False)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")).strip() + "\n"


def _parse(script: str) -> Any:
    import tvm

    from tuner.errors import InvalidWorkloadError

    try:
        return tvm.script.from_source(script)
    except Exception as exc:  # noqa: BLE001 - TVM's parser raises many kinds
        raise InvalidWorkloadError(f"the kernel's script does not parse: {str(exc).splitlines()[0][:200]}") from None


def canonical_script(script: str) -> str:
    """The text a submitted script prints back as (whitespace and spelling normalised), so the same
    module gets the same key however it was written."""
    return module_text(_parse(script))


def random_module(script: str, rng: np.random.Generator | None = None) -> Any:
    """A CPE kernel workload's one-operator Relax module (its ``script``), its ``const_*`` parameters
    bound to constants (zeros, or uniform in [-1, 1) from ``rng``): what the model's node is, up to the
    constants' values."""
    import tvm
    from tvm import relax

    from tuner.errors import InvalidWorkloadError

    mod = _parse(script)
    if "main" not in [str(g.name_hint) for g in mod.get_global_vars()]:
        raise InvalidWorkloadError("the kernel's script has no main function")
    binds = {}
    for p in mod["main"].params:
        if str(p.name).startswith("const_"):
            shape, dtype = [int(d) for d in p.ty.shape], str(p.ty.dtype)
            data = np.zeros(shape, dtype) if rng is None else rng.uniform(-1, 1, shape).astype(dtype)
            binds[str(p.name)] = tvm.runtime.tensor(data)
    return relax.transform.BindParams("main", binds)(mod) if binds else mod


class Rebuilt(NamedTuple):
    node: Node  # the workload's operator as a graph node (constants bound to zeros)
    dtype: str  # the graph's dtype
    work: Work  # what the whole operator does (its legalized C's counts)


@lru_cache(maxsize=256)
def rebuilt(script: str) -> Rebuilt:
    """A CPE kernel workload's operator rebuilt from its script alone (what a worker does)."""
    from tuner.errors import InvalidWorkloadError
    from tuner.ir.graph import AotError
    from tuner.ir.relax_reader import read_relax

    mod = random_module(script)
    try:
        graph = read_relax(mod, None)  # the operator as it is: no target's LDM splits it
    except AotError as exc:
        raise InvalidWorkloadError(f"the kernel's operator does not compile: {exc}") from None
    nodes = [n for n in graph.nodes if n.op == "tir"]
    if len(nodes) != 1:
        raise InvalidWorkloadError(f"a CPE kernel is one operator; its script has {len(nodes)} generic steps")
    return Rebuilt(nodes[0], graph.dtype, graph.functions[nodes[0].attrs["function"]].work)
