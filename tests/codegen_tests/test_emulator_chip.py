"""swemu running the whole chip (SWEMU_CGS core groups of 64 CPE threads each).

The example pair tuner/codegen/emulator/examples/cgs_{host,slave}.c runs one kernel on every core group
in the two host forms: swDNN's SW26010 form (a host pthread per CG, each ``athread_init`` then
``athread_spawn`` on its own CG) and the SW26010-Pro all-shared mode (``athread_spawn_cgs`` /
``athread_join_cgs``). Each CG's kernel reads its own slice (``_CGN``) and CPE 0 of CG g issues g extra
gets, so the report's per-CG counts show that every CG's DMA is counted apart.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.codegen.emulator.build import EXAMPLES_DIR, build, compile_emulator, launch

pytestmark = pytest.mark.needs("gcc", "nm", "objcopy")

B = 16  # floats per CPE (examples/cgs.h)


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("swemu_cgs")
    emu = compile_emulator(d)
    host, slave = EXAMPLES_DIR / "cgs_host.c", EXAMPLES_DIR / "cgs_slave.c"
    return {"sw": build([host], [slave], d / "cgs_sw", emulator_object=emu),
            "pro": build([host], [slave], d / "cgs_pro", host_cflags=["-DCGS_PRO"], emulator_object=emu)}


def run(prog: Path, tmp_path: Path, cgs: int | None, target: str = "sw26010") -> tuple[str, dict]:
    report = tmp_path / f"{prog.name}_{cgs}.json"
    settings = {} if cgs is None else {"CGS": cgs}
    proc = launch([prog, str(cgs or 1)], wait_s=60, target=target, timeout=20, report=report, **settings)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 0 mismatches" in proc.stdout
    return proc.stdout, json.loads(report.read_text())


@pytest.mark.parametrize(("form", "cgs", "target"), [("sw", 4, "sw26010"), ("pro", 6, "sw26010pro"),
                                                     ("pro", 4, "sw26010")])
def test_each_core_group_runs_its_slice_and_counts_its_own_dma(programs, tmp_path, form, cgs, target):
    _, rep = run(programs[form], tmp_path, cgs, target)
    assert rep["config"]["cgs"] == cgs
    # one spawn per host thread on SW26010, one athread_spawn_cgs on the Pro
    assert rep["spawns"] == (cgs if form == "sw" else 1)
    per_cg = rep["core_groups"]
    assert [g["cg"] for g in per_cg] == list(range(cgs))
    for g in per_cg:
        c = g["cg"]
        assert (g["get_reqs"], g["get_bytes"]) == (2 * 64 + c, 2 * 64 * B * 4 + 4 * c), c
        assert (g["put_reqs"], g["put_bytes"]) == (64, 64 * B * 4), c
    assert len(rep["cpes"]) == 64 * cgs
    cpe0 = [c for c in rep["cpes"] if c["id"] == 0]
    assert [(c["cg"], c["get_reqs"]) for c in cpe0] == [(g, 2 + g) for g in range(cgs)]
    assert rep["totals"]["get_reqs"] == sum(g["get_reqs"] for g in per_cg)


@pytest.mark.parametrize("form", ["sw", "pro"])
def test_one_core_group_reports_as_before(programs, tmp_path, form):
    """Without SWEMU_CGS the chip calls run on one CG and the report has no per-CG section."""
    _, rep = run(programs[form], tmp_path, None)
    assert "cgs" not in rep["config"] and "core_groups" not in rep
    assert len(rep["cpes"]) == 64 and all("cg" not in c for c in rep["cpes"])
    assert rep["totals"]["get_reqs"] == 2 * 64 and rep["spawns"] == 1
