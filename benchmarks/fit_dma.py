"""Fit the DMA request model to the calibration data of both targets and report the errors.

    python benchmarks/fit_dma.py

Prints, per target, every calibration point (measured vs modelled bandwidth and relative error),
then the fitted values as the source of ``tuner.dma_model._FITTED_VALUES`` (to paste there),
and the errors of the stored ``FITTED`` values. Last line: one JSON object with the max relative
bandwidth error of the fresh fit per target and overall.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tuner.dma_model import FITTED, DmaParams, fitted_table  # noqa: E402
from tuner.measure.calibration import CLOCK_GHZ, fit, load_points, model_bandwidth, relative_errors  # noqa: E402

TARGETS = ("sw26010", "sw26010-pro")


def table(name: str, params: DmaParams) -> np.ndarray:
    points = load_points(name)
    errs = relative_errors(params, points)
    clock = CLOCK_GHZ[name]
    print(f"\n== {name}: {len(points)} points (bandwidth in GB/s at {clock} GHz) ==")
    print(f"{'point':48s} {'measured':>9s} {'model':>9s} {'rel err':>8s}")
    for point, err in zip(points, errs):
        model = model_bandwidth(params, point) * clock
        flag = "  <-- worst" if err == errs.max() else ""
        print(f"{point.description:48s} {point.measured_gbps:9.3f} {model:9.3f} {err:8.3f}{flag}")
    print(f"max rel err {errs.max():.4f}, median {np.median(errs):.4f}")
    return errs


def main() -> None:
    start = time.perf_counter()
    # the Pro first: the sw26010 fit starts from (and borrows the unidentifiable parts of) it
    fitted = {name: fit(name) for name in ("sw26010-pro", "sw26010")}
    print(f"fitted both targets in {time.perf_counter() - start:.1f} s")
    max_err = {name: float(table(name, fitted[name]).max()) for name in TARGETS}

    print("\n# paste into tuner/dma_model.py")
    print(fitted_table(fitted), end="")

    for name in TARGETS:
        if name in FITTED:
            stored = float(relative_errors(FITTED[name], load_points(name)).max())
            same = "same as" if FITTED[name] == fitted[name] else "DIFFERS from"
            print(f"stored FITTED[{name!r}]: max rel err {stored:.4f} ({same} the fresh fit)")
        else:
            print(f"stored FITTED has no {name!r} entry yet")

    print(json.dumps({
        "sw26010_max_rel_err": round(max_err["sw26010"], 4),
        "sw26010-pro_max_rel_err": round(max_err["sw26010-pro"], 4),
        "dma_max_rel_err": round(max(max_err.values()), 4),
    }))


if __name__ == "__main__":
    main()
