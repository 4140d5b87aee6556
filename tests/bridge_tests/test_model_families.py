"""The thirteen model families of tuner/models/torch_families.py: each builds, compiles ahead of time from
torch (untuned: every kernel at its fallback or analysed schedule), runs on the athread emulator and
matches torch at rtol 1e-3, atol 1e-5. benchmarks/model_coverage.py runs them tuned, and through ONNX.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.models.torch_families import FAMILIES  # noqa: E402

pytestmark = pytest.mark.needs("gcc", "make")
IMAGE = {"swin_block": 56}  # a 7x7 window needs a side of 28 after the 4x4 patches


def test_thirteen_families_beside_the_seven_of_the_zoo() -> None:
    from tuner.models.torch_models import TORCH_MODELS

    assert len(FAMILIES) == 13 and set(FAMILIES) <= set(TORCH_MODELS) and len(TORCH_MODELS) == 20


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_compiles_and_matches_torch_on_the_emulator(tmp_path: Path, name: str) -> None:
    from tuner.aot import compile_model
    from tuner.bridge.extract import torch_to_relax
    from tuner.models.torch_models import build

    module, (x,) = build(name, width=0.25, image=IMAGE.get(name, 32))
    result = compile_model(torch_to_relax(module, (x,)), "sw26010", tmp_path / name, lambda w: None)
    assert result.kernels  # its convolutions / matmuls run as CPE kernels
    got = run_model(result.out_dir, [x.numpy()], "sw26010").output
    with torch.no_grad():
        ref = module(x).numpy()
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)


@pytest.mark.slow
def test_an_onnx_export_with_shape_arithmetic_imports_compiles_and_matches_torch(tmp_path: Path) -> None:
    """The unrolled LSTM expands its zero state to ``x.shape[0]``: its ONNX export computes the batch
    with Shape -> Gather, which TVM's ONNX importer alone cannot read (the import folds it first)."""
    from tuner.aot import compile_model
    from tuner.bridge.extract import onnx_to_relax
    from tuner.models.torch_models import build

    module, (x,) = build("lstm_unrolled", width=0.25, image=32)
    path = tmp_path / "lstm.onnx"
    with torch.no_grad():
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=17)
    onnx = pytest.importorskip("onnx")
    assert "Shape" in {node.op_type for node in onnx.load(str(path)).graph.node}  # the precondition
    result = compile_model(onnx_to_relax(path), "sw26010", tmp_path / "out", lambda w: None)
    got = run_model(result.out_dir, [x.numpy()], "sw26010").output
    with torch.no_grad():
        ref = module(x).numpy()
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)
