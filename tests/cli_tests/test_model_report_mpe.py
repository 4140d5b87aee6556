"""Issue #46: the whole-model report counts the MPE steps in its summary line and says which operators
run on the MPE and why (the five that take most time, then one line for the rest)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import cli.model_report as report
from tuner.aot.mpe import MpeReason
from tuner.aot.timing import CPE, MPE, ModelTime, StepTime


def test_the_report_names_each_mpe_operator_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    monkeypatch.setattr(report, "console", console)
    steps = [StepTime("k", "conv2d_grad_data", CPE, 1e-3, 1e-3, "expr-...", untuned=True)]
    steps += [StepTime(f"b{i}", f"op{i}", MPE, (10 - i) * 1e-6, (10 - i) * 1e-6, "", why=MpeReason.NO_CPE_FORM.value)
              for i in range(7)]
    steps.append(StepTime("b7", "op0", MPE, 1e-6, 1e-6, "", why=MpeReason.NO_CPE_FORM.value))
    report.whole_model_report(ModelTime(steps, 1e-5), "m", "sw26010")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "8 steps)" in text and "1 steps run a task's kernel without its own tuned record" in text
    assert f"on the MPE: op0 x2 (0.011 ms): {MpeReason.NO_CPE_FORM.value}" in text
    assert text.count("on the MPE: op") == report.MPE_LINES and "on the MPE: 2 more operators (0.009 ms)" in text


def test_operator_names_stay_whole_on_an_80_column_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal rich prints 80 columns: a long operator name folds onto a second line and is
    never cut (two gradients of one conv differ only at the end of their names)."""
    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    monkeypatch.setattr(report, "console", console)
    names = ["conv2d_grad_data", "conv2d_grad_weight"]
    steps = [StepTime(f"k{i}", name, CPE, (2 - i) * 1e-3, (2 - i) * 1e-3, "expr-...") for i, name in enumerate(names)]
    report.whole_model_report(ModelTime(steps, 1e-5), "m", "sw26010")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    rows = [line for line in text.splitlines() if line.startswith("│")]  # the table's body
    assert rows and "…" not in "".join(rows) and max(len(line) for line in rows) <= 80
    # the first column, joined across folded lines, spells each name whole
    cells = "".join(line.split("│")[1].strip() for line in rows)
    assert all(name in cells for name in names), cells
