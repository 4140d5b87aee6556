"""nn.pad's gradient is one strided_slice per padded axis (tuner.ir.gradients.pad_grad): a slice of one
axis has CPE forms (tuner.aot.cpe_region), where one slice of an image's rows and columns together ran
on the MPE (ShiftNet's pads, in both programs). The step keeps matching torch on the emulator."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from train_helpers import assert_two_steps_match_torch, sgd_step  # noqa: E402

from tuner.aot.timing import CPE  # noqa: E402
from tuner.train.program import compile_training  # noqa: E402


class _PadNet(torch.nn.Module):
    """A 1 x 1 conv, a zero pad of rows and columns (as ShiftNet pads before its shift), a valid 3 x 3 conv."""

    def __init__(self) -> None:
        super().__init__()
        self.expand = torch.nn.Conv2d(3, 8, 1)
        self.conv = torch.nn.Conv2d(8, 4, 3)
        self.fc = torch.nn.Linear(4 * 16 * 16, 3)

    def forward(self, x: Any) -> Any:
        a = torch.nn.functional.pad(torch.relu(self.expand(x)), (1, 1, 1, 1))
        return self.fc(self.conv(a).flatten(1))


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_a_pad_of_rows_and_columns_has_per_axis_slices_on_the_cpes_and_matches_torch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module, x = _PadNet(), torch.randn(2, 3, 16, 16)
    step, reference, opt = sgd_step(module, x)
    slices = [line for line in step.module.script().splitlines() if "R.strided_slice(" in line]
    axes = sorted(re.search(r"R\.strided_slice\(\w+, \((\d+),\)", s).group(1) for s in slices)  # type: ignore[union-attr]
    assert axes == ["2", "3"], slices  # rows, then columns: one axis each
    program = compile_training(step, "sw26010", tmp_path, None, "pad")
    rows = [r for r in program.timing.by_operator() if r.relax_op == "strided_slice"]
    assert rows and all(r.where == CPE for r in rows), rows
    assert_two_steps_match_torch(step, module, reference, x, opt, tmp_path)
