"""`swtune tune-model`: extraction, embedded tuning with worker processes, the per-layer report."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")

from service.cli import app  # noqa: E402


def test_tune_model_embedded_reports_every_layer_and_the_end_to_end_estimate():
    result = CliRunner().invoke(app, ["tune-model", "resnet18", "--width", "0.125", "--image", "32", "--trials", "6",
                                      "--workers", "1", "--timeout", "240"], terminal_width=200)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "12 tunable tasks" in out and "nn.batch_norm x20" in out  # untuned operators are listed
    rows = [line for line in out.splitlines() if re.match(r"^│ (conv2d|dense)_\d+", line)]
    layer_rows = [r for r in rows if r.count("│") == 8]  # the per-layer table (7 columns)
    assert len(layer_rows) == 12 and all("x │" in r for r in layer_rows)  # every layer has a speedup
    assert "estimated end-to-end time of the tuned operators" in out


def test_tune_model_rejects_an_unknown_model():
    result = CliRunner().invoke(app, ["tune-model", "lenet"], terminal_width=200)
    assert result.exit_code == 2 and "unknown model 'lenet'" in result.output
    result = CliRunner().invoke(app, ["tune-model", "alexnet", "--target", "gpu"], terminal_width=200)
    assert result.exit_code == 2 and "unknown target" in result.output
