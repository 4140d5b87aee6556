"""The API refuses what it cannot run with a clear error, before any work: no tuning log is created, no
model is loaded, nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

import swtune
from tuner.errors import SwtuneError, UnknownTargetError


@pytest.fixture
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    import tuner.bridge.extract

    monkeypatch.setattr(tuner.bridge.extract, "load_relax", lambda *a, **k: pytest.fail("a model was loaded"))


def test_trials_and_budget_are_one_or_the_other(tmp_path: Path, no_model_loads: None) -> None:
    with pytest.raises(swtune.ArgumentError, match="trials .* or budget .* not both"):
        swtune.tune_model("alexnet", trials=4, budget=8, db=str(tmp_path / "x.db"))
    assert not list(tmp_path.iterdir())


def test_a_bad_tuning_log_names_the_two_forms(tmp_path: Path, no_model_loads: None) -> None:
    with pytest.raises(ValueError, match="SQLAlchemy URL"):
        swtune.tune_model("alexnet", db="sqlite:/unet.db")
    with pytest.raises(UnknownTargetError, match="unknown target"):
        swtune.tune_model("alexnet", target="gpu", db=str(tmp_path / "x.db"))


def test_an_unknown_model_is_a_value_error(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="unknown model 'lenet'"):
        swtune.compile_model("lenet", tmp_path / "out", db=str(tmp_path / "x.db"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"overlap": True, "ranks": 2}, "overlap tunes while training"),
    ({"overlap": True, "trials": 0}, "overlap tunes while training"),
    ({"overlap": True, "framework_style": True}, "framework_style is a reference program"),
    ({"optimizer": "adagrad"}, "'adagrad' is not a valid OptimizerKind: optimizer is one of"),
    ({"loss": "hinge"}, "'hinge' is not a valid Loss: loss is one of"),
    ({"batch": 9, "ranks": 2, "trials": 0}, "batch 9 does not split over 2 ranks"),
])
def test_train_refuses_what_cannot_run(tmp_path: Path, kwargs: dict, message: str) -> None:
    pytest.importorskip("torch")
    with pytest.raises(swtune.ArgumentError, match=message):
        swtune.train("mlp", tmp_path / "prog", db=str(tmp_path / "log.db"), **kwargs)
    assert not (tmp_path / "prog").exists() and not (tmp_path / "log.db").exists()


def test_calibrate_takes_a_csv_file_with_the_csv_source_only(tmp_path: Path) -> None:
    with pytest.raises(swtune.ArgumentError, match="csv_file"):
        swtune.calibrate("csv", store=False)
    with pytest.raises(swtune.ArgumentError, match="csv_file"):
        swtune.calibrate("published", csv_file=tmp_path / "x.csv", store=False)
    with pytest.raises(ValueError):
        swtune.calibrate("hardware", store=False)  # not a Source
    bad = tmp_path / "bad.csv"
    bad.write_text("workload,seconds\n")
    with pytest.raises(swtune.ArgumentError, match="header must name the columns workload, config, seconds"):
        swtune.calibrate("csv", csv_file=bad, store=False)


def test_an_argument_error_is_a_swtune_error_and_a_value_error() -> None:
    """The command line prints a SwtuneError as one line; a Python caller catches a bad argument as ValueError."""
    assert issubclass(swtune.ArgumentError, SwtuneError) and issubclass(swtune.ArgumentError, ValueError)
