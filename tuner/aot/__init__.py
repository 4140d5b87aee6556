"""Ahead-of-time compilation of a whole model to a Sunway athread program (the swTVM workflow).

Owns: lowering a model's graph (tuner.ir) to a program: the tuned slave kernels of tuner.codegen
(kernels: config lookup with a logged fallback, one merged slave file; fusion: element-wise
epilogues), memory-bound operators on the CPEs at their tuned or analysed configuration (cpe_ops, with
the cut plans of tuner.space.cpe), layout copies (cpe_layout), region copies (cpe_region) and
resizes (cpe_resize), steps sharing a spawn
(launch_groups), the rest as plain C on the MPE (mpe), buffers (memory), weights.bin (weights), host
C and the Makefile (host, makefile), the whole-model time (timing); ``compile_model`` (compiler) ties
it together. A kind's behaviour comes through tuner.task_kind. Nothing here imports tvm: the front
end (tuner.ir) and codegen do.
"""

from __future__ import annotations

from typing import Any

from tuner.ir.graph import AotError

__all__ = ["AotError", "AotResult", "apply_best", "compile_model", "current_lookup"]


def __getattr__(name: str) -> Any:  # lazy: importing tuner.aot must stay cheap
    if name in ("compile_model", "AotResult", "OpRow", "to_relax"):
        from tuner.aot import compiler

        return getattr(compiler, name)
    if name in ("apply_best", "current_lookup"):
        from tuner.aot import context

        return getattr(context, name)
    raise AttributeError(name)
