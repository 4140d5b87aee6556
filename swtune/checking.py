"""Checking an expression operator's schedules on the emulator and by tiles (``check_op``)."""

from __future__ import annotations

from swtune.errors import ArgumentError
from swtune.results import OpCheck


def check_op(op: str, args: str | None = None, *, target: str = "sw26010", configs: int = 50, seed: int = 0,
             max_steps: int = 1500) -> OpCheck:
    """Build ``configs`` random valid configs of the operator ``op`` (``FILE.py:FUNC`` returning te tensors,
    called with the JSON keyword arguments ``args``) on the emulator and check them, and its tiles.

    Each config's athread C is generated, built against the emulator and run; its output is compared with
    TVM's llvm run of the same expression, and its DMA counts (emulator counters and the lowered TIR) with
    the analysis. The tile check (each output tile computed in numpy only from the boxes its schedule
    fetches) runs on as many configs; configs of more than ``max_steps`` (tile, k tile) steps are skipped.
    Returns an ``OpCheck`` (``failed`` says whether any config failed). Raises ``ArgumentError`` for an
    operator that is not an expression operator, ``ValueError`` for one that cannot be loaded."""
    from tuner.backends.expr_check import emulator_check
    from tuner.codegen.tilecheck import check_space
    from tuner.expr.workload import workload_from_op
    from tuner.space import space_for
    from tuner.space.expr_space import ExprSpace

    wl = workload_from_op(op, args)
    space = space_for(wl, target)
    if not isinstance(space, ExprSpace):
        raise ArgumentError(f"{op} is not an expression operator: its space is a {type(space).__name__}")
    tiles = check_space(space, configs, seed=seed, max_steps=max_steps)
    emu = emulator_check(space, configs, seed=seed)
    return OpCheck(wl.key, emu, tiles)
