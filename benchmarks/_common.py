"""Helpers shared by the benchmark scripts: import path, timing, the JSON last line."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python benchmarks/x.py` from a checkout, installed or not
    sys.path.insert(0, str(ROOT))


def median_seconds(fn: Callable[[], Any], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def emit(figures: dict[str, Any]) -> None:
    """Print the figures as the last line: one JSON object."""
    print(json.dumps(figures, sort_keys=True))
