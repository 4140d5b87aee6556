"""`swtune demo` end to end with a tiny budget: embedded server, a simulator worker, the table."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from service.demo import run_demo


@pytest.mark.slow
def test_demo_tunes_alexnet_conv_and_vgg19_fc_layers(tmp_path) -> None:
    out = io.StringIO()
    results = run_demo(trials=4, workers=1, db_path=str(tmp_path / "demo.db"), strategy="random",
                       console=Console(file=out, width=120), timeout=120)
    assert [r.name for r in results] == ["conv1", "conv2", "conv3", "conv4", "conv5", "fc6", "fc7", "fc8"]
    assert all(r.tuned_s and r.trials == 4 and r.baseline_s > 0 for r in results)
    assert results[5].flops == 2 * 4096 * 25088  # VGG-19's fc6, not AlexNet's (9216 inputs)
    text = out.getvalue()
    assert "AlexNet conv and VGG-19 fc layers" in text
    assert "average speedup over conv layers" in text and "average speedup over fc layers" in text
