"""Tests for swemu, the x86 athread emulator (tuner/codegen/emulator).

Each test builds a host + slave pair from tuner/codegen/emulator/examples with
gcc, runs it, and checks the program output and the JSON report (SWEMU_REPORT)
against numbers computed here by hand.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EMU = ROOT / "tuner" / "codegen" / "emulator"
EX = EMU / "examples"


def _load_build_module():
    # loaded from its path so the tests do not depend on tuner.codegen's __init__
    spec = importlib.util.spec_from_file_location("swemu_build", EMU / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


B = _load_build_module()

pytestmark = pytest.mark.needs("gcc", "nm", "objcopy")

ERROR_EXIT = B.ERROR_EXIT_CODE


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
@pytest.fixture(scope="session")
def builddir(tmp_path_factory):
    return tmp_path_factory.mktemp("swemu")


@pytest.fixture(scope="session")
def emu_obj(builddir):
    return B.compile_emulator(builddir)


@pytest.fixture(scope="session")
def program(builddir, emu_obj):
    cache: dict[tuple[str, str], Path] = {}

    def get(host: str, slave: str) -> Path:
        key = (host, slave)
        if key not in cache:
            out = builddir / f"{host}__{slave}"
            B.build([EX / f"{host}.c"], [EX / f"{slave}.c"], out, emulator_object=emu_obj)
            cache[key] = out
        return cache[key]

    return get


def run(prog: Path, tmp_path: Path, *args: str, **env_over):
    report = tmp_path / f"report_{prog.name}_{len(list(tmp_path.iterdir()))}.json"
    target, timeout = env_over.pop("SWEMU_TARGET", "sw26010"), env_over.pop("SWEMU_TIMEOUT", "20")
    proc = B.launch([prog, *args], wait_s=60, target=target, timeout=timeout, report=report,
                    **{k.removeprefix("SWEMU_"): v for k, v in env_over.items()})
    rep = json.loads(report.read_text()) if report.exists() else None
    return proc, rep


def lines128(addr: int, n: int) -> int:
    return 0 if n == 0 else ((addr + n + 127) >> 7) - (addr >> 7)


def strided_blocks(len_: int, bsize: int, gap: int):
    """(memory offset, ldm offset, size) of each block: gap semantics."""
    if bsize == 0:
        return [(0, 0, len_)]
    out, k = [], 0
    while k * bsize < len_:
        out.append((k * (bsize + gap), k * bsize, min(bsize, len_ - k * bsize)))
        k += 1
    return out


def strided_lines(base: int, len_: int, bsize: int, gap: int) -> int:
    return sum(lines128(base + m, n) for m, _, n in strided_blocks(len_, bsize, gap))


# --------------------------------------------------------------------------
# strided DMA
# --------------------------------------------------------------------------
DS_N, DS_RB, DS_CB = 40, 4, 8          # examples/dma_scale.h


def _ds_expected(cpe: int):
    """Hand-computed DMA traffic of one CPE of dma_scale (bases 128-B aligned)."""
    off = (cpe * DS_RB * DS_N + 8 * (cpe % 4)) * 8
    tile = DS_RB * DS_CB * 8
    gap, bsize = (DS_N - DS_CB) * 8, DS_CB * 8
    tile_lines = strided_lines(off, tile, bsize, gap)
    return {"get_reqs": 2, "get_bytes": 32 + tile, "get_lines": 1 + tile_lines,
            "put_reqs": 1, "put_bytes": tile, "put_lines": tile_lines}


@pytest.mark.parametrize("mode", ["athread", "desc"])
def test_strided_dma_scale_results_and_counts(program, tmp_path, mode):
    prog = program("dma_scale_host", "dma_scale_slave")
    proc, rep = run(prog, tmp_path, mode)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 0 mismatches" in proc.stdout          # tiles scaled, everything else untouched
    assert rep["status"] == "ok" and rep["errors"] == [] and rep["warnings"] == []
    assert rep["spawns"] == 1 and len(rep["cpes"]) == 64
    for c in rep["cpes"]:
        exp = _ds_expected(c["id"])
        assert {k: c[k] for k in exp} == exp, c["id"]
        assert c["rma_reqs"] == 0 and c["rlc_put"] == 0
    # tile (256 B) + coef (32 B) + two reply ints, plus alignment padding
    assert 296 <= rep["ldm_static_bytes"] <= 296 + 64
    tot = rep["totals"]
    for k in ("get_reqs", "get_bytes", "get_lines", "put_reqs", "put_bytes", "put_lines"):
        assert tot[k] == sum(_ds_expected(i)[k] for i in range(64)), k
    dyn = 256 if mode == "desc" else 0               # ldm_malloc'd tile in the desc variant
    for c in rep["cpes"]:
        assert c["ldm_dynamic_peak_bytes"] == dyn
        assert c["ldm_peak_bytes"] == rep["ldm_static_bytes"] + dyn


def test_strided_dma_scale_with_fewer_cpes(program, tmp_path):
    proc, rep = run(program("dma_scale_host", "dma_scale_slave"), tmp_path, SWEMU_CPES=12)
    assert proc.returncode == 0 and "OK 0 mismatches" in proc.stdout, proc.stdout + proc.stderr
    assert len(rep["cpes"]) == 12
    assert rep["totals"]["get_reqs"] == 24 and rep["totals"]["put_reqs"] == 12


def test_strided_get_and_put_gap_semantics(program, tmp_path):
    proc, rep = run(program("stride_probe_host", "stride_probe_slave"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    outs = dict(line.split() for line in proc.stdout.splitlines())
    got = {k: bytes.fromhex(v) for k, v in outs.items()}
    src = bytes(range(256))
    sentinel = 0xEE

    # get with (offset 3, len 40, bsize 8, gap 5): LDM holds the blocks back to back
    ldm = bytearray()
    for m, _, n in strided_blocks(40, 8, 5):
        ldm += src[3 + m:3 + m + n]
    assert list(ldm[:16]) == [3, 4, 5, 6, 7, 8, 9, 10, 16, 17, 18, 19, 20, 21, 22, 23]
    exp1 = bytes(ldm) + bytes([sentinel]) * (256 - 40)
    assert got["out1"] == exp1
    assert got["out3"] == exp1                      # Pro athread_dma_get_stride: same bytes

    # put of the 40 LDM bytes to out+5 with (bsize 12, gap 20)
    exp2 = bytearray([sentinel]) * 256
    for m, l, n in strided_blocks(40, 12, 20):
        exp2[5 + m:5 + m + n] = ldm[l:l + n]
    assert got["out2"] == bytes(exp2)
    assert got["out4"] == bytes(exp2)               # Pro athread_dma_put_stride
    assert exp2[5 + 12:5 + 32] == bytes([sentinel]) * 20   # the gap is skipped, not written

    c0 = rep["cpes"][0]
    # gets: param block (40 B, aligned), sw strided get, Pro strided get
    assert c0["get_reqs"] == 3 and c0["get_bytes"] == 40 + 40 + 40
    assert c0["get_lines"] == 1 + 2 * strided_lines(3, 40, 8, 5) == 11
    # puts: contiguous 40, sw strided, Pro contiguous 40, Pro strided
    assert c0["put_reqs"] == 4 and c0["put_bytes"] == 160
    assert c0["put_lines"] == 1 + strided_lines(5, 40, 12, 20) + 1 + strided_lines(5, 40, 12, 20) == 10
    assert all(c["get_reqs"] == 0 and c["put_reqs"] == 0 for c in rep["cpes"][1:])


# --------------------------------------------------------------------------
# broadcast DMA
# --------------------------------------------------------------------------
@pytest.mark.parametrize("ncpe", [64, 16])
def test_bcast_mode_delivers_to_all_cpes(program, tmp_path, ncpe):
    proc, rep = run(program("bcast_host", "bcast_slave"), tmp_path, SWEMU_CPES=ncpe)
    # the host checks, for every CPE, sum(BCAST table) * (id+1) and sum(ROW_MODE table of its row)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 0 bad CPEs" in proc.stdout
    param, table, rowtab = 24, 256 * 8, 16 * 8
    for c in rep["cpes"]:
        i = c["id"]
        if i == 0:
            exp = (3, param + table + rowtab)        # param + BCAST (counted once) + ROW_MODE
        elif i % 8 == 0:
            exp = (2, param + rowtab)
        else:
            exp = (1, param)
        assert (c["get_reqs"], c["get_bytes"]) == exp, i
        assert (c["put_reqs"], c["put_bytes"]) == (1, 32)
        assert c["syncs"] == 2
    assert rep["totals"]["get_reqs"] == ncpe + 1 + ncpe // 8
    assert rep["totals"]["get_bytes"] == ncpe * param + table + (ncpe // 8) * rowtab


# --------------------------------------------------------------------------
# register communication
# --------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [4, 1])
def test_register_communication_row_col_broadcast_sums(program, tmp_path, depth):
    proc, rep = run(program("rlc_host", "rlc_slave"), tmp_path, SWEMU_RLC_DEPTH=depth)
    # host checks row sums (4 lanes), column sums, the P2P ring value and an intv8 row broadcast
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 0 bad CPEs" in proc.stdout
    for c in rep["cpes"]:
        if c["col"] == 0:   # row bcast + col bcast + ring + intv8 bcast; 7 + 7 + 1 received
            assert (c["rlc_put"], c["rlc_get"]) == (4, 15), c["id"]
        else:
            assert (c["rlc_put"], c["rlc_get"]) == (3, 16), c["id"]
    assert rep["totals"]["rlc_put"] == 8 * 4 + 56 * 3
    assert rep["totals"]["rlc_get"] == 8 * 15 + 56 * 16
    assert rep["warnings"] == []


@pytest.mark.slow
def test_register_communication_deadlock_reports_timeout(program, tmp_path):
    proc, rep = run(program("spawn_host", "rlc_deadlock_slave"), tmp_path, SWEMU_TIMEOUT=1)
    assert proc.returncode == ERROR_EXIT
    assert "done" not in proc.stdout
    (err,) = rep["errors"]
    assert err["type"] == "timeout"
    assert "9 (simd_getr" in err["message"]
    assert "timeout" in proc.stderr


# --------------------------------------------------------------------------
# LDM budget
# --------------------------------------------------------------------------
def test_ldm_static_overflow_is_reported_not_crashed(program, tmp_path):
    prog = program("spawn_host", "ldm_static_overflow_slave")
    proc, rep = run(prog, tmp_path, SWEMU_LDM_BYTES=65536)
    assert proc.returncode == ERROR_EXIT, proc.stderr
    assert "done" not in proc.stdout
    assert "ldm_overflow on CPE 0" in proc.stderr and "70000" in proc.stderr and "65536" in proc.stderr
    assert rep["status"] == "error" and rep["exit_code"] == ERROR_EXIT
    (err,) = rep["errors"]
    assert err["type"] == "ldm_overflow" and err["cpe"] == 0
    assert err["static_bytes"] >= 70000 and err["budget_bytes"] == 65536
    assert rep["ldm_static_bytes"] >= 70000

    # the same program fits a larger budget
    proc, rep = run(prog, tmp_path, SWEMU_LDM_BYTES=131072)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    assert rep["errors"] == [] and rep["totals"]["ldm_peak_bytes"] >= 70000


def test_ldm_malloc_overflow_is_reported_not_crashed(program, tmp_path):
    prog = program("spawn_host", "ldm_malloc_overflow_slave")
    proc, rep = run(prog, tmp_path)              # default budget 65536
    assert proc.returncode == ERROR_EXIT, proc.stderr
    assert "done" not in proc.stdout
    (err,) = rep["errors"]
    assert err["type"] == "ldm_overflow"
    assert 0 <= err["cpe"] < 64
    assert f"ldm_overflow on CPE {err['cpe']}" in proc.stderr
    assert err["requested_bytes"] == 40000 and err["dynamic_bytes"] == 40000
    assert err["static_bytes"] == rep["ldm_static_bytes"] == 128      # double small[16]
    assert err["budget_bytes"] == 65536

    proc, rep = run(prog, tmp_path, SWEMU_LDM_BYTES=100000)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    assert all(c["ldm_dynamic_peak_bytes"] == 80000 for c in rep["cpes"])
    assert all(c["ldm_peak_bytes"] == 80128 for c in rep["cpes"])


def test_dma_destination_outside_ldm_is_an_error(program, tmp_path):
    proc, rep = run(program("spawn_host", "dma_not_ldm_slave"), tmp_path)
    assert proc.returncode == ERROR_EXIT
    (err,) = rep["errors"]
    assert err["type"] == "dma_dest_not_ldm" and err["cpe"] == 5
    assert "dma_dest_not_ldm on CPE 5" in proc.stderr


# --------------------------------------------------------------------------
# SW26010-Pro API
# --------------------------------------------------------------------------
def test_pro_dma_rma_api(program, tmp_path):
    proc, rep = run(program("pro_host", "pro_slave"), tmp_path, SWEMU_TARGET="sw26010pro")
    # host checks the strided tile products, the RMA row broadcast (into an
    # ldm_malloc'd buffer, reply word on the stack) and the RMA get from CPE id+1
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 0 mismatches" in proc.stdout
    assert rep["config"]["target"] == "sw26010pro" and rep["config"]["ldm_budget_bytes"] == 262144
    param, tile, x = 32, 2 * 8 * 4, 8 * 4
    for c in rep["cpes"]:
        i = c["id"]
        gets = (3, param + tile + x) if i == 0 else (2, param + tile)   # ibcast counted once
        assert (c["get_reqs"], c["get_bytes"]) == gets, i
        assert (c["put_reqs"], c["put_bytes"]) == (2, tile + 16)
        rma = (2, 16 + 4) if c["col"] == 0 else (1, 4)                 # row_ibcast + rma_get
        assert (c["rma_reqs"], c["rma_bytes"]) == rma, i
        assert c["ldm_dynamic_peak_bytes"] == 16
    assert rep["errors"] == []


# --------------------------------------------------------------------------
# the one-command build
# --------------------------------------------------------------------------
def test_one_command_build(tmp_path):
    # the literal command of the README (no objcopy renaming: weak slave_ fallback)
    out = tmp_path / "ds_single"
    cmd = [B.find_cc(), "-O2", "-pthread", "-I", str(EMU), str(EX / "dma_scale_host.c"),
           str(EX / "dma_scale_slave.c"), str(EMU / "athread_emu.c"), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    proc, rep = run(out, tmp_path)
    assert proc.returncode == 0 and "OK 0 mismatches" in proc.stdout, proc.stderr
    assert rep["totals"]["get_reqs"] == 128 and rep["totals"]["put_reqs"] == 64
