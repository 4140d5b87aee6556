"""Models into Relax: a torch module (through torch.export) or an ONNX file, with TVM's frontends.

torch and onnx are optional (``pip install 'swtune[models]'``): a missing one is a clear ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"importing models needs {module}: pip install 'swtune[models]'") from None


def torch_to_relax(module: Any, example_inputs: Sequence[Any]) -> Any:
    torch = require("torch")
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(module.eval(), tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False)


def onnx_to_relax(path: str | Path, shapes: dict[str, list[int]] | None = None) -> Any:
    onnx = require("onnx")
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(str(path))
    return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
