"""Fidelity of the simulator to the generated C: register communication (RLC) issues what the model charges.

tuner/space/analysis.py charges each 32-B RLC message 2 P1 ops on SW26010: a vector load + putr/putc on
the owner (one broadcast over a whole row or column of 8), getr/getc + a vector store on every receiver.
The model's charge is isolated as the difference of the share time with the SW26010 target and with the
same target sharing by RMA (the RLC ops are the only term that differs), and divided by the messages it
covers: ``kf`` k tiles of ``a`` and of ``b`` per step, ``ldm_bytes / 32`` messages each.

For the best DGEMM 2048^3 and conv3x3 configs of the calibration (those of test_microkernel), the
emitted helpers' per-message loops are counted (intrinsics per loop iteration, no memcpy in a loop, the
vector accesses aligned: LDM copies padded to whole vectors), then the same configs run on swemu
against numpy, and the emulator's RLC counters (putr/putc and getr/getc per CPE) give each CPE's ops,
which must equal the model's per step times its steps, and no vector access may be misaligned.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from test_microkernel import CASES
from tools import require

from tuner.space.factory import space_for
from tuner.targets import Sharing, get_target
from tuner.workloads import Conv2d, Dense, Workload

pytest.importorskip("tvm")

MSG = 32  # bytes of one SW26010 RLC message (a 256-bit register)
_RLC = re.compile(r"\bsimd_(?:load|loadu|store|storeu|putr|putc|getr|getc)\(")
_DECL = re.compile(r"__thread_local double ([AB])_ldm\[(\d+)\]\[(\d+)\] __attribute__\(\(aligned\((\d+)\)\)\);")
# the same tiles on workloads whose every CPE has a tile and whose k tiles fill whole chunks of kf = 8
# (or, dgemm_k4, one chunk of only 4 k tiles: the C sends those 4), so the model's per-step charge is
# every CPE's exact RLC work; the k tiles a chunk holds
EMU = {"dgemm": (Dense(256, 256, 256, "float64"), 8),
       "dgemm_k4": (Dense(256, 256, 128, "float64"), 4),
       "conv3x3": (Conv2d(4, 32, 18, 18, 64, 3, 3, dtype="float64"), 8),
       "conv3x3_earlier": (Conv2d(4, 64, 18, 18, 64, 3, 3, dtype="float64"), 8)}
EMU_CFG = {"dgemm_k4": "dgemm"}  # the config each EMU case runs (CASES key)


def analyses(w: Workload, cfg: dict):
    """The config analysed on SW26010 (RLC) and on the same target sharing by RMA (no CPE work)."""
    t = get_target("sw26010")
    rma = dataclasses.replace(t, sharing=Sharing.RMA)
    a = space_for(w, t).analyze(space_for(w, t).encode(cfg)[None, :])
    b = space_for(w, rma).analyze(space_for(w, rma).encode(cfg)[None, :])
    assert a.valid[0], a.reason[0]
    return a, b


def model_rlc(w: Workload, cfg: dict, k_sent: int = 8) -> dict[str, float]:
    """The model's RLC ops per step of one CPE, the messages they cover and the steps per CPE."""
    a, b = analyses(w, cfg)
    assert a.pr[0] == a.pc[0] == 8
    ops = float(a.share_cycles_per_step[0] - b.share_cycles_per_step[0])
    # each CPE of a row (column) owns one of the chunk's k tiles (kf = 8, or fewer when the reduction
    # has fewer) and receives the others
    msgs = (float(a.a.ldm_bytes[0]) + float(a.b.ldm_bytes[0])) / MSG * k_sent
    return {"ops": ops, "msgs": msgs, "steps": float(a.steps_per_cpe[0]), "active": float(a.active_cpes[0]),
            "ldm_a": float(a.a.ldm_bytes[0]), "ldm_b": float(a.b.ldm_bytes[0])}


def function(c: str, name: str) -> str:
    start = c.index(f"static void {name}(")
    depth, i = 0, c.index("{", start)
    for j in range(i, len(c)):
        depth += {"{": 1, "}": -1}.get(c[j], 0)
        if depth == 0:
            return c[start:j + 1]
    raise AssertionError(f"{name} not closed")


def message_loops(fn: str) -> list[str]:
    """The bodies of the helper's per-message loops (``for (off ...)``), nested loops included."""
    out = []
    for m in re.finditer(r"for \(off = 0; off < \w+; off \+= 32\) \{", fn):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(fn[i], 0)
            i += 1
        out.append(fn[m.end():i - 1])
    return out


@pytest.mark.parametrize("name", ["dgemm", "conv3x3"])
def test_rlc_message_issues_what_the_model_charges(name):
    from tuner.codegen.sources import generate

    w, cfg, _ = CASES[name]
    c = generate(w, "sw26010", cfg).files["slave.c"]
    m = model_rlc(w, cfg)
    per_msg = m["ops"] / m["msgs"]
    assert per_msg == 2.0, m
    for fn, put, get in (("sw_rlc_row", "simd_putr", "simd_getr"), ("sw_rlc_col", "simd_putc", "simd_getc")):
        loops = message_loops(function(c, fn))
        recv, bcast, p2p = loops  # receiver; owner over a whole row (column); owner over a partial one
        # receiver: getr/getc off the bus and one aligned vector store, nothing else per message
        assert _RLC.findall(recv) == [f"{get}(", "simd_store("], recv
        # owner over 8 CPEs (the best configs' 8x8 mesh): one aligned vector load and one broadcast
        assert _RLC.findall(bcast) == ["simd_load(", f"{put}("] and f"{put}(v, 8)" in bcast, bcast
        assert len(_RLC.findall(recv)) == len(_RLC.findall(bcast)) == per_msg
        # owner over p < 8: one load and p - 1 sends, the model's p per message
        assert _RLC.findall(p2p) == ["simd_load(", f"{put}("] and "!= me" in p2p, p2p
        assert all("memcpy" not in lp for lp in loops)
    # both operands go over the mesh, from a 32-B aligned LDM copy padded to whole messages, the
    # whole tile of the current k tile (the bytes the model charges: ldm_bytes of a and b)
    decls = {r: (int(s), int(e), int(al)) for r, s, e, al in _DECL.findall(c)}
    for role, fn, key in (("A", "sw_rlc_row", "ldm_a"), ("B", "sw_rlc_col", "ldm_b")):
        slots, elems, align = decls[role]
        assert align % MSG == 0 and (elems * 8) % MSG == 0 and elems * 8 >= m[key], (role, decls[role], m)
        call = re.search(rf"{fn}\(\(char \*\){role}_ldm\[[^]]+\], ([^;]+), sw_kt_owner", c)
        assert call is not None and call.group(1).count(f"{role.lower()}_n[") >= 2, role


@pytest.fixture(scope="module")
def backend_dir(tmp_path_factory):
    require("gcc", "nm", "objcopy")
    return tmp_path_factory.mktemp("rlc_emu")


def emulate(workdir, w: Workload, cfg: dict) -> dict:
    """Run ``cfg`` on swemu against numpy; the emulator's report (per-CPE counters)."""
    from tuner.backends.emulator_backend import EmulatorBackend

    space_for(w, "sw26010").check(cfg)
    res = EmulatorBackend(workdir=workdir).measure(w, "sw26010", [cfg])[0]
    assert res.status == "ok", res.error
    assert res.details["dma_match"], (res.details["dma"], res.details["dma_expected"])
    reports = list(workdir.glob("k*/report.json"))
    assert len(reports) == 1
    return json.loads(reports[0].read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EMU))
def test_rlc_on_emulator_matches_model(backend_dir, name):
    """Every CPE's RLC ops (2 per message sent as a broadcast, 2 per message received) equal the
    model's charge per step times its steps; every vector load/store of the messages is aligned."""
    _, cfg, _ = CASES[EMU_CFG.get(name, name)]
    w, k_sent = EMU[name]
    rep = emulate(backend_dir / name, w, cfg)
    m = model_rlc(w, cfg, k_sent)
    assert m["ops"] / m["msgs"] == 2.0, m  # 2 ops per message, over the k tiles that exist
    cpes = [c for c in rep["cpes"] if c["rlc_put"] or c["rlc_get"]]
    assert len(cpes) == m["active"] == 64
    # every CPE sends each of its messages as one broadcast and receives the others' messages
    assert {c["rlc_put"] + c["rlc_get"] for c in cpes} == {m["msgs"] * m["steps"]}, m
    assert {2 * (c["rlc_put"] + c["rlc_get"]) for c in cpes} == {m["ops"] * m["steps"]}, m
    assert rep["totals"]["simd_unaligned"] == 0


BCAST_RAGGED = dict(tile_n=1, tile_oh=2, tile_ow=5, tile_k=4, tile_c=2, grid="2x2", share="bcast", dma="rows",
                    put_lines=0, db_a=1, db_b=1, db_c=0, tile_order="row", inner="k", simd=4, unroll=1, acc="ldm",
                    pack="none")
# bcast of b on SW26010: (workload, config)
BCAST_CONV = (Conv2d(2, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, dtype="float64"), BCAST_RAGGED)
BCAST_DGEMM = (Dense(256, 256, 256, "float64"), {**CASES["dgemm"][1], "share": "bcast", "pack": "none"})


@pytest.mark.slow
def test_bcast_column_rlc_of_ragged_unaligned_requests(backend_dir):
    """bcast's b on SW26010 (each CPE of a column fetches its share of the requests, then sends each
    over the column): requests of 2*3*3 doubles (144 B, so every other one starts off a 32-B line and
    each ends in a 16-B tail) move as whole unaligned vectors and one tail message copied outside the
    loop; the result is right and each request is ceil(144 / 32) = 5 messages."""
    from tuner.codegen.sources import generate

    w, cfg = BCAST_CONV
    c = generate(w, "sw26010", cfg).files["slave.c"]
    assert "sw_rlc_col_span((char *)&B_ldm[" in c and "sw_rlc_row(" not in c.split("#endif", 2)[-1]
    fn = function(c, "sw_rlc_col_span")
    recv, send = message_loops(fn)  # whole messages only: unaligned vector forms, no byte copy
    assert _RLC.findall(recv) == ["simd_getc(", "simd_storeu("], recv
    assert _RLC.findall(send)[0] == "simd_loadu(" and "memcpy" not in send, send
    assert fn.count("memcpy") == 2  # the tail, once per request on each side
    rep = emulate(backend_dir / "bcast", w, cfg)
    gets = sorted(c["rlc_get"] for c in rep["cpes"] if c["rlc_get"])
    assert gets and all(g % 5 == 0 for g in gets), gets
    assert np.sum(gets) == rep["totals"]["rlc_get"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ragged_2x2", "dgemm_8x8"])
def test_bcast_column_rlc_on_emulator_matches_model(backend_dir, name):
    """bcast's b on SW26010: the model charges the column RLC the C issues (``sw_rlc_col_span``), and
    its busiest CPE's putc / getc equal the emulator's.

    ragged_2x2: 4 requests of 144 B per b tile over a column of 2: CPE 0 sends 2 (4 whole messages +
    a 16-B tail each, one putc per message to the other CPE), receives 2; per request 4 x 3 ops
    (unaligned load = 2, putc; getc, unaligned store = 2) + the tail (2 doubles copied = 4, the
    register through LDM, the putc or getc) = 18, and 2 column syncs.
    dgemm_8x8: 32 requests of 256 B over a column of 8: CPE 0 sends 4 of them as 8 broadcasts each,
    receives 28 x 8 messages, 3 ops per message either way, and 8 column syncs."""
    from tuner.space.compute import bcast_column_rlc

    w, cfg = {"ragged_2x2": BCAST_CONV, "dgemm_8x8": BCAST_DGEMM}[name]
    t = get_target("sw26010")
    a, rma = analyses(w, cfg)
    p = float(a.pr[0])
    reqs = a.b.requests / a.b.loads  # requests per b tile
    req_bytes = a.b.bytes / a.b.requests
    col = bcast_column_rlc(t, reqs, req_bytes, w.dtype_bytes, a.pr)
    expect = {"ragged_2x2": (4, 144, 10, 10, 4 * 18), "dgemm_8x8": (32, 256, 32, 224, 32 * 8 * 3)}[name]
    assert (reqs[0], req_bytes[0], col.puts[0], col.gets[0]) == expect[:4]
    assert col.cycles[0] == expect[4] + p * t.share_latency_cycles
    # one b tile fetched per step (the column splits its requests), so the charge per step is one fetch's
    fetches = float(a.b.loads[0]) * p
    assert fetches == a.steps_per_cpe[0]
    # sharing by RMA (the Pro's emitted C: a DMA column broadcast, SW_GET_COLBC) costs the CPEs nothing
    assert rma.share_cycles_per_step[0] == 0.0
    assert a.share_cycles_per_step[0] == col.cycles[0] > 0
    rep = emulate(backend_dir / f"bcast_{name}", w, cfg)
    cpes = [c for c in rep["cpes"] if c["rlc_put"] or c["rlc_get"]]
    assert len(cpes) == a.active_cpes[0]
    # the requests split evenly over each column here, so every CPE is the busiest one
    assert {c["rlc_put"] for c in cpes} == {col.puts[0] * fetches}
    assert {c["rlc_get"] for c in cpes} == {col.gets[0] * fetches}
