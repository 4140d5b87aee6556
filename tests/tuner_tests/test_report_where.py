"""Where a binding runs (tuner.ir.graph.Where, the AOT report's ``where`` column) keeps its strings.

The compile report, manifest.json's steps and the benchmarks' counts show these strings: renaming or
re-valuing a member must fail here (as tests/tuner_tests/test_choices.py pins the knob choices).
"""

from __future__ import annotations

import json

from tuner.aot.compiler import AotResult, OpRow
from tuner.ir.graph import Where

# The report's strings, member by member (as of issue #44).
STORED = {
    "TUNED_KERNEL": "tuned kernel",
    "FALLBACK_KERNEL": "fallback kernel",
    "CPE_MEMORY_BOUND": "CPE (memory-bound)",
    "MPE": "MPE",
    "FUSED_EPILOGUE": "fused epilogue",
    "VIEW": "view (no-op)",
    "COMPILE_TIME": "compile time",
    "REMOVED": "removed (unused)",
}


def test_members_are_the_report_strings() -> None:
    assert {m.name: m.value for m in Where} == STORED


def test_a_report_shows_and_counts_the_strings() -> None:
    rows = [OpRow("x", "nn.relu", Where.MPE), OpRow("y", "reshape", Where.VIEW), OpRow("z", "add", Where.MPE)]
    result = AotResult.__new__(AotResult)
    result.rows = rows
    assert result.counts() == {"MPE": 2, "view (no-op)": 1}
    assert result.format_table().splitlines()[2].split() == ["y", "reshape", "view", "(no-op)"]
    assert json.dumps([r.__dict__ for r in rows[:1]]) == \
        '[{"source": "x", "relax_op": "nn.relu", "where": "MPE", "detail": ""}]'
