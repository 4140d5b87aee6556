"""``swtune train`` as a user runs it: the program, the losses, the phase table, and bad input refused
before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
from typer.testing import CliRunner  # noqa: E402

from cli.app import build_app  # noqa: E402

app = build_app()


def _train(tmp: Path, *args: str) -> object:
    """``swtune train`` without tuning (unless the test gives --trials: the default tunes first)."""
    trials = [] if "--trials" in args else ["--trials", "0"]
    return CliRunner().invoke(app, ["train", *args, *trials, "--db", f"sqlite:///{tmp / 'log.db'}"])


def test_train_tunes_with_a_default_budget_unless_trials_is_0() -> None:
    """Issue #46: the default is tuning (not --overlap), and --help says so."""
    import inspect

    from cli.train_commands import DEFAULT_TRIALS, train

    assert inspect.signature(train).parameters["trials"].default == DEFAULT_TRIALS > 0
    assert inspect.signature(train).parameters["overlap"].default is False
    res = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert "by default the step is tuned with this budget" in text and "0 skips tuning" in text
    assert f"default: {DEFAULT_TRIALS}" in text


@pytest.mark.slow
def test_train_compiles_runs_and_reports_each_phase(tmp_path: Path) -> None:
    out = tmp_path / "prog"
    data = tmp_path / "d.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x=rng.standard_normal((12, 32)).astype(np.float32), y=rng.integers(0, 10, 12))
    res = _train(tmp_path, "mlp", "-o", str(out), "--optimizer", "momentum", "--lr", "0.1", "--batch", "4",
                 "--steps", "4", "--data", str(data), "--checkpoint-every", "2")
    assert res.exit_code == 0, res.output
    for phase in ("forward", "backward", "update"):
        assert phase in res.output
    losses = [float(line.split()[1]) for line in (out / "losses.txt").read_text().splitlines()]
    assert len(losses) == 4 and all(np.isfinite(losses))
    assert (out / "checkpoint.bin").exists() and (out / "Makefile").exists() and (out / "training.json").exists()
    # batch 4 of 12 samples: three batches, the fourth step takes the first again
    assert losses[3] != losses[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--optimizer", "adagrad"], "'adagrad' is not a valid OptimizerKind"),
    (["--loss", "hinge"], "'hinge' is not a valid Loss"),
    (["--lr", "-1"], "learning rate must be a positive number"),
])
def test_bad_options_are_refused_and_nothing_is_written(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "prog"
    res = _train(tmp_path, "mlp", "-o", str(out), *args)
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())
    assert not out.exists()


def test_data_of_another_shape_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "d.npz"
    np.savez(data, x=np.zeros((8, 7), np.float32), y=np.zeros(8, np.int64))
    out = tmp_path / "prog"
    res = _train(tmp_path, "mlp", "-o", str(out), "--data", str(data))
    assert res.exit_code == 2
    assert "x must be [N, 32] for this model" in " ".join(res.output.split())
    assert not out.exists()
