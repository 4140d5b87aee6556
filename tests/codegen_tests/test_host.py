"""The one host program (tuner/codegen/host.py) of every op: its inputs, its prepass and packs, and
what its timing line measures (what tuner/measure/simulator.py ``simulate`` models)."""

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from tuner.aot.kernels import _generate, _tile_order, channel_axis
from tuner.codegen.host import pack_tiles, packed_roles
from tuner.codegen.sources import generate
from tuner.codegen.sunway import parse_timing
from tuner.expr.workload import workload_from_op
from tuner.space import space_for
from tuner.space.ops import geometry_for
from tuner.targets import get_target
from tuner.workloads import BatchMatmul, Conv2d, Dense

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"
BMM = BatchMatmul(2, 9, 16, 20)  # its b is an activation: packed before each call
DENSE = Dense(20, 24, 36)  # its b is a layer's weights: packed once
CONV = Conv2d(1, 8, 9, 9, 8, 3, 3, pad_h=1, pad_w=1)  # padded: the spec's prepass


def _config(workload, pack: str, seed: int = 0) -> dict:
    space = space_for(workload, "sw26010", restrict={"pack": [pack]})
    return dict(space.decode(space.sample(1, np.random.default_rng(seed))[0]))


def _timed(host: str) -> str:
    """The C between the two timer reads that precede the spawn."""
    return host[host.index("unsigned long t0 = sw_cycles();"):host.index("unsigned long t1 = sw_cycles();")]


def test_a_per_call_pack_and_the_prepass_are_timed_with_the_kernel_a_constant_pack_is_not():
    assert not geometry_for(BMM).b_constant and geometry_for(DENSE).b_constant
    bmm = generate(BMM, "sw26010", _config(BMM, "b")).files["host.c"]
    assert "/* pack B" in _timed(bmm)  # the analysis' host_pack_bytes: every call
    dense = generate(DENSE, "sw26010", _config(DENSE, "b")).files["host.c"]
    assert "/* pack weight" in dense and "/* pack" not in _timed(dense)
    assert dense.index("/* pack weight") < dense.index("athread_init();")
    conv = generate(CONV, "sw26010", _config(CONV, "none")).files["host.c"]
    assert "/* the prepass" in _timed(conv) and "/* pack" not in conv
    for host in (bmm, dense, conv):  # the line the backends read: host work + spawn to join
        assert 'printf("SWTUNE_KERNEL_SECONDS=%.9e\\n", (double)(t2 - t0)' in host
        assert 'printf("SWTUNE_PREPASS_SECONDS=%.9e\\n", (double)(t1 - t0)' in host


def test_every_op_reads_one_file_per_operand_the_prepass_one_unpadded():
    conv = generate(CONV, "sw26010", _config(CONV, "none")).files["host.c"]
    assert "sw_read(argv[1], a_in, sizeof(float) * 648L)" in conv  # 1x8x9x9, padded into a on the host
    assert "float *a = sw_alloc(sizeof(float) * 968L)" in conv  # 1x8x11x11
    assert "usage: prog [data weight output]" in conv
    three = workload_from_op(f"{EXAMPLES}/linalg.py:weighted_gemm", {"m": 16, "n": 16, "k": 16})
    space = space_for(three, "sw26010")
    host = generate(three, "sw26010", space.decode(space.sample(1, np.random.default_rng(0))[0])).files["host.c"]
    assert "if (argc >= 4)" in host and "sw_read(argv[3], a1, " in host and re.search(r"sw_fill\(a1, \d+L, 3u\);", host)


@pytest.mark.parametrize("workload", [BMM, DENSE, Conv2d(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=2)])
def test_the_compiled_model_packs_in_the_measured_hosts_order(workload):
    """An AOT kernel's pack permutation is the measured host's (both from pack_tiles), and it is the
    permutation the emitted C loop performs."""
    cfg = _config(workload, "b")
    s = generate(workload, "sw26010", cfg).scheduled
    (role,) = packed_roles(s)
    kernel = _generate(workload, get_target("sw26010"), cfg, 0, "tuned")
    shape, full = pack_tiles(s, role)
    order = kernel.packs[s.roles.index(role)].order
    np.testing.assert_array_equal(order, _tile_order(shape, full))
    assert sorted(order) == list(range(int(np.prod(shape))))  # whole tiles: a permutation
    # the C loop's arithmetic on every element
    host = generate(workload, "sw26010", cfg).files["host.c"]
    steps = re.findall(r"i = r % (\d+)L; r /= \d+L; t \+= \(i / (\d+)L\) \* (\d+)L; o \+= \(i % \d+L\) \* (\d+)L;",
                       host)
    tile = int(re.search(r"\[t \* (\d+)L \+ o\]", host).group(1))
    e = np.arange(int(np.prod(shape)))
    r, t, o = e.copy(), np.zeros_like(e), np.zeros_like(e)
    for ext, f, ts, fs in ((int(x) for x in st) for st in steps):
        i = r % ext
        r //= ext
        t += (i // f) * ts
        o += (i % f) * fs
    np.testing.assert_array_equal(t * tile + o, order)


def test_the_epilogue_channel_axis_is_the_output_dim_of_the_col_axis():
    assert channel_axis(CONV) == 1  # NCHW: k
    assert channel_axis(DENSE) == 1 and channel_axis(BMM) == 2  # the last: n


@pytest.mark.slow
@pytest.mark.needs("gcc", "objcopy", "nm")
def test_emulated_program_prints_its_host_work_inside_the_kernel_time(tmp_path):
    from tuner.codegen.emulator.build import build_kernel, compile_emulator, launch

    cfg = _config(BMM, "b")
    d = generate(BMM, "sw26010", cfg).write(tmp_path / "k")
    emu = compile_emulator(tmp_path, cflags=("-O2", "-Wno-psabi"))
    prog = build_kernel(d, tmp_path / "kernel_emu", cflags=("-O2", "-Wno-psabi"), emulator_object=emu)
    run = launch([prog], cwd=tmp_path, wait_s=300, timeout="120", ldm_bytes=get_target("sw26010").ldm_bytes)
    assert run.returncode == 0, run.stderr
    prepass = float(re.search(r"^SWTUNE_PREPASS_SECONDS=(\S+)$", run.stdout, re.M).group(1))
    kernel = parse_timing(run.stdout)
    assert kernel is not None and 0 < prepass < kernel
