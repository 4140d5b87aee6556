"""Issue #46: a memory-bound task is rated in GB/s (the bytes of its operands and results moved once),
a GEMM-like one in GFLOPS; the CLI's tables show each in its unit."""

from __future__ import annotations

from typing import Any

import pytest

from cli.output import task_rate
from tuner.workloads import Dense, Rate, rate, rate_of


def _add(n: int) -> Any:
    pytest.importorskip("tvm")
    from tvm import te

    from tuner.expr.workload import ExprWorkload

    a, b = te.placeholder((n,), name="a"), te.placeholder((n,), name="b")
    return ExprWorkload.from_tensors([a, b, te.compute((n,), lambda i: a[i] + b[i], name="c")], "add")


@pytest.mark.slow  # tvm's import and the expression's parse
def test_a_memory_bound_task_is_rated_in_gb_per_second() -> None:
    w = _add(1024)
    assert rate_of(w) == Rate.GBPS and w.bytes_moved == 3 * 1024 * 4
    assert rate(w, 1e-6) == pytest.approx(3 * 1024 * 4 / 1e-6 / 1e9)
    d = Dense(8, 8, 8)
    assert rate_of(d) == Rate.GFLOPS and rate(d, 1e-6) == pytest.approx(d.flops / 1e-6 / 1e9)
    assert rate(d, None) is None


def test_the_tables_show_each_task_in_its_unit() -> None:
    assert task_rate({"best_gflops": 0.01, "best_gbps": 12.34}) == "12.3 GB/s"
    assert task_rate({"best_gflops": 5.0, "best_gbps": None}) == "5.0"
    assert task_rate({"best_gflops": None}) == "-"
