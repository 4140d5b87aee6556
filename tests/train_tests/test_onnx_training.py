"""Training an ONNX model: its initializers are the parameters, its batch norms frozen; 5 steps on the
emulator match torch (the model in eval mode) within 1e-4, and ``swtune train FILE.onnx`` runs it."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")

import torch  # noqa: E402

from tuner.ir.optimizers import Optimizer, OptimizerKind  # noqa: E402
from tuner.ir.train_modules import Loss  # noqa: E402
from tuner.train.reference import relative_error  # noqa: E402


def _cnn() -> Any:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 10))
    with torch.no_grad():  # statistics a trained model would have
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    return model.eval()


def _export(model: Any, path: Path, fold: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, (torch.randn(4, 3, 8, 8),), str(path), dynamo=False, input_names=["x"],
                          do_constant_folding=fold, training=torch.onnx.TrainingMode.EVAL)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [OptimizerKind.MOMENTUM, OptimizerKind.ADAM])
def test_an_onnx_model_with_a_batch_norm_trains_as_torch_does_in_eval_mode(tmp_path: Path,
                                                                           kind: OptimizerKind) -> None:
    from tuner.ir.onnx_training import onnx_training_step
    from tuner.train import data as train_data
    from tuner.train.program import build_emulated, compile_training, run_emulated, split_state
    from tuner.train.reference import torch_steps

    model = _cnn()
    path = tmp_path / "cnn.onnx"
    _export(model, path, fold=False)  # the batch norm stays an operator: its statistics frozen, gamma/beta trained
    opt = Optimizer(kind, 0.01)
    step = onnx_training_step(path, Loss.CROSS_ENTROPY, opt)
    assert len(step.params) == 4 + 2  # conv, batch norm scale and shift, linear; not the statistics
    batches = train_data.synthetic(1, 3, 4, (4, 3, 8, 8), (4, 10), Loss.CROSS_ENTROPY)
    out = tmp_path / "program"
    compile_training(step, "sw26010", out, lambda w: None, "cnn")
    batches.tofile(out / "data.bin", step.dtype)
    build_emulated(out)
    run = run_emulated(out, out / "data.bin", 5, step.dtype)
    ref = torch_steps(model, batches, opt, Loss.CROSS_ENTROPY, 5, frozen=True)
    assert relative_error(run.losses, np.array(ref.losses)) <= 1e-4
    torch_params = list(ref.params.values())  # torch's order is the ONNX initializers' (one module each)
    got = split_state(run.state, step)
    for (name, _), want in zip(step.params, torch_params, strict=True):
        assert got[name].shape == want.shape and relative_error(got[name], want) <= 1e-4, name


@pytest.mark.slow
def test_swtune_train_runs_an_onnx_file_and_refuses_a_batch_it_cannot_take(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.app import build_app

    app = build_app()

    path = tmp_path / "cnn.onnx"
    _export(_cnn(), path, fold=True)
    db = f"sqlite:///{tmp_path / 'log.db'}"
    bad = CliRunner().invoke(app, ["train", str(path), "-o", str(tmp_path / "bad"), "--batch", "8", "--db", db])
    assert bad.exit_code != 0 and "batches of 4 per rank" in bad.output and not (tmp_path / "bad").exists()
    ok = CliRunner().invoke(app, ["train", str(path), "-o", str(tmp_path / "run"), "--steps", "3", "--trials", "0",
                                  "--db", db])
    assert ok.exit_code == 0, ok.output
    losses = np.loadtxt(tmp_path / "run" / "losses.txt")
    assert losses.shape == (3, 2) and np.isfinite(losses).all()
