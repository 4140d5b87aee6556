"""`swtune tune-model`: extraction, embedded tuning with worker processes, the per-layer report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")

from cli.app import build_app  # noqa: E402

app = build_app()


@pytest.mark.slow
def test_tune_model_then_compile_embedded(tmp_path: Path) -> None:
    """tune-model keeps its log at --db; compile reads the same log and every kernel is tuned."""
    url = f"sqlite:///{tmp_path / 'swtune.db'}"
    model = ["resnet18", "--width", "0.125", "--image", "32"]
    result = CliRunner().invoke(app, ["tune-model", *model, "--trials", "6", "--workers", "1", "--timeout", "240",
                                      "--db", url], terminal_width=200)
    assert result.exit_code == 0, result.output
    out = result.output
    # 12 distinct layers; where a shortcut add fuses into a conv (epilogue=residual_add) that form is a
    # task of its own: 9 plain and 7 fused forms; the padded max pool and the global average pool are
    # memory-bound CPE kernel tasks
    assert "18 tunable tasks (2 memory-bound" in out
    assert re.search(r"nn\.batch_norm\s+x20", out)  # untuned operators are listed (the line may wrap)
    rows = [line for line in out.splitlines() if re.match(r"^│ (conv2d|dense)_\d+", line)]
    layer_rows = [r for r in rows if r.count("│") == 8]  # the per-layer table (7 columns)
    assert len(layer_rows) == 16 and all("x │" in r for r in layer_rows)  # every layer has a speedup
    assert "estimated end-to-end time" in out and "whole model (simulated): tuned" in out
    assert (tmp_path / "swtune.db").exists()
    out_dir = tmp_path / "aot"
    res = CliRunner().invoke(app, ["compile", *model, "--db", url, "-o", str(out_dir)], terminal_width=200)
    assert res.exit_code == 0, res.output
    kernels = json.loads((out_dir / "manifest.json").read_text())["kernels"]
    assert len({k["workload_key"] for k in kernels}) == 16 and all(k["status"] == "tuned" for k in kernels)
    assert len({k["workload_key"] for k in kernels if k["workload_key"].endswith("-ep_residual_add")}) == 7
    cpe = json.loads((out_dir / "manifest.json").read_text())["cpe_kernels"]
    # the max pool and the 1x1 mean run on the CPEs at their tuned configs (the mean alone would be faster
    # on the MPE, but it shares the spawn of the CPE steps around it: tuner.aot.placement)
    assert sorted(k["workload"]["name"] for k in cpe) == ["mean", "nn_max_pool2d"], cpe
    assert all(k["status"] == "tuned" for k in cpe), cpe


@pytest.mark.slow
def test_tune_model_names_an_operator_that_cannot_compile_before_tuning(tmp_path: Path, monkeypatch) -> None:
    from tuner.ir import relax_reader

    monkeypatch.setattr(relax_reader, "KEPT_OPS", (*relax_reader.KEPT_OPS, "nn.relu"))  # relu: no rule, not legalized
    url = f"sqlite:///{tmp_path / 'swtune.db'}"
    result = CliRunner().invoke(app, ["tune-model", "resnet18", "--width", "0.125", "--image", "32", "--db", url],
                                terminal_width=200)
    assert result.exit_code == 2, result.output
    assert "relax.nn.relu (binding" in result.output and "nothing was tuned" in result.output
    assert not (tmp_path / "swtune.db").exists()


def test_tune_model_rejects_an_unknown_model():
    result = CliRunner().invoke(app, ["tune-model", "lenet"], terminal_width=200)
    assert result.exit_code == 2 and "unknown model 'lenet'" in result.output
    result = CliRunner().invoke(app, ["tune-model", "alexnet", "--target", "gpu"], terminal_width=200)
    assert result.exit_code == 2 and "unknown target" in result.output
