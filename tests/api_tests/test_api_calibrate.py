"""``swtune.calibrate`` on swDNN's published sweep: a fitted profile with intervals, stored in the tuning
log as its target's next version, and written as a document the simulator reads back."""

from __future__ import annotations

import json
from pathlib import Path

import swtune
from tuner.profile import Profile


def test_the_published_sweep_is_fitted_stored_and_written(tmp_path: Path) -> None:
    log, out = tmp_path / "log.db", tmp_path / "profile.json"
    cal = swtune.calibrate(swtune.Source.PUBLISHED, db=str(log), bootstrap=3, folds=2, out=out)
    assert isinstance(cal, swtune.Calibration) and cal.stored and cal.url.endswith("log.db")
    assert cal.profile.target == "sw26010" and cal.profile.version == 1
    assert cal.summary["records"] == 172 and cal.summary["rms_log_err"] > 0
    fitted = [p for p in cal.profile.parameters if p.interval]
    assert fitted and all(lo <= p.value <= hi for p in fitted for lo, hi in [p.interval])
    assert Profile.from_json(json.loads(out.read_text())).version == cal.profile.version
    # the active one unless it breaks a FACTS figure, and then the reason is given
    assert cal.active == (not cal.breaks)
    with swtune.open_log(str(log), "sw26010") as lookup:  # the log now exists: nothing tuned in it
        from tuner.workloads import Dense

        assert lookup(Dense(1, 64, 64)) is None
