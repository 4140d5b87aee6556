"""Code generation: TVM s_tir schedules of the GEMM-like kernels -> Sunway athread C (host + slave).

Owns: te_ops (every op's PrimFunc, as its kind writes it), schedule (config -> s_tir.Schedule), boxes
(copy nests -> DMA), printer (the slave C around the loops tuner.ir.cprint prints), host (host C,
headers, Makefile), sources (all files of one kernel), tir_check (LDM and DMA figures from the TIR,
compared with the analysis), tilecheck (an expression's tiles computed from the boxes its schedule
fetches), reference (TVM's llvm build of an op, the emulator check's reference), sunway (files and
commands for a real node, the timing line), emulator/ (swemu, the x86 athread emulator). Imports tvm
lazily (inside functions).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_schedule", "generate", "tir_figures", "compare_with_analysis", "write_kernel", "parse_timing"]


def __getattr__(name: str) -> Any:  # lazy: importing tuner.codegen must not import tvm
    if name == "build_schedule":
        from tuner.codegen.schedule import build_schedule

        return build_schedule
    if name == "generate":
        from tuner.codegen.sources import generate

        return generate
    if name in ("tir_figures", "compare_with_analysis"):
        from tuner.codegen import tir_check

        return getattr(tir_check, name)
    if name in ("write_kernel", "parse_timing"):
        from tuner.codegen import sunway

        return getattr(sunway, name)
    raise AttributeError(name)
