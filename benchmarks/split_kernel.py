"""The measurement that settles issue #11 on a Sunway machine: one config as a full kernel and a compute-only twin.

    nice python benchmarks/split_kernel.py [--out DIR] [--config JSON] [--sample 6000] [--emulate]

The simulator says the best float64 3x3 conv of the calibration shape (n32 c128 18x18 k128, one SW26010 core
group) runs at 0.80 of peak, P0-bound, its DMA hidden. swDNN's timings cannot say whether that is optimistic
(docs/simulator_fidelity.md): they are consistent with a slow DMA and a perfect inner loop as much as with a
faster DMA and an inner loop at ~0.57. Two timings of *our* kernel on the hardware separate the two, the way
swGEMM's ``-DUSE_COMP`` build does (feifeibear/swGEMM README: "without it, you will get DMA time"):

- ``DIR/full/``: the generated kernel as the tuner would run it;
- ``DIR/compute_only/``: the same slave.c built with ``-DSWTUNE_COMPUTE_ONLY``: every LDM buffer is zeroed at
  kernel entry and every DMA get and put only marks its reply word done, so the kernel runs the same loops,
  register communication, syncs and FMAs with no memory traffic. Zeroed operands keep the arithmetic off
  any denormal path; the zeroing is a few hundred cycles per CPE.

Each directory builds with ``make`` (sw5cc) and prints ``SWTUNE_KERNEL_SECONDS`` (the host-side pad, then spawn
to join: what the simulator's total models) and ``SWTUNE_PREPASS_SECONDS`` (the pad alone). ``DIR/model.json``
holds the simulator's prediction for both: ``full_kernel_s`` (its total) and ``compute_only_s`` (FMA issue + P1
traffic + loop overhead + register communication + tile overhead + spawn/join + the host-side pad, i.e. the same
breakdown with every DMA term removed). On hardware:

- measured compute_only / model compute_only_s: the inner loop as compiled (dual issue, latencies, RLC, syncs)
  against what tuner/space/compute.py charges;
- (measured full - measured compute_only) vs the model's ``dma_not_hidden_s`` (exposed DMA, waited-on puts,
  double-buffered DMA longer than the compute it overlaps): DMA the kernel does not hide (overlap, reply
  polling, descriptor issue) against what tuner/measure/simulator.py charges.

Default config: the best of a ``--sample`` random sample hill-climbed (as benchmarks/swdnn_population.py);
``--config`` takes a JSON config instead. ``--emulate`` builds both with gcc against swemu (functional, no
timing): the full kernel must match numpy, the compute-only twin must finish with no DMA traffic. Last line:
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

import _common  # noqa: F401  (sets the import path)
import numpy as np
from _common import emit
from swdnn_population import best_seconds

from tuner.backends.emulator_backend import RTOL, random_inputs, reference
from tuner.codegen.sources import generate
from tuner.measure.simulator import breakdown
from tuner.space.factory import space_for
from tuner.targets import Family, get_target
from tuner.workloads import Conv2d

CALIBRATION_CONV = Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64")  # benchmarks/calibration.py's conv
API_INCLUDE = '#include "swtune_slave_api.h"\n'
KERNEL_ENTRY = re.compile(r"^void swtune_kernel\([^)]*\) \{\n", re.M)
LDM_ARRAY = re.compile(r"^__thread_local (?:double|float) (\w+)\[", re.M)

# The compute-only twin's DMA: a get or put only marks its reply word done (the data stays what it was).
COMPUTE_ONLY_API = """
#ifdef SWTUNE_COMPUTE_ONLY
/* benchmarks/split_kernel.py: compute-only twin. No DMA: every request only marks its reply word done. */
#undef SW_GET
#undef SW_PUT
#undef SW_GET_ROWBC
#undef SW_GET_COLBC
#undef SW_WAIT
#define SW_GET(mem, ldm, len, bsize, gap, rp) (++*(rp))
#define SW_PUT(ldm, mem, len, bsize, gap, rp) (++*(rp))
#define SW_GET_ROWBC(mem, ldm, len, bsize, gap, rp) (++*(rp))
#define SW_GET_COLBC(mem, ldm, len, bsize, gap, rp) (++*(rp))
#define SW_WAIT(rp, n) while (*(rp) != (n))
#endif
"""


def compute_only_slave(slave: str) -> str:
    """The slave.c of the compute-only twin (module docstring); the full kernel when SWTUNE_COMPUTE_ONLY is unset."""
    if slave.count(API_INCLUDE) != 1 or len(KERNEL_ENTRY.findall(slave)) != 1:
        raise ValueError("generated slave.c changed shape: no single API include or kernel entry to patch")
    arrays = LDM_ARRAY.findall(slave)
    if not arrays:
        raise ValueError("generated slave.c declares no LDM buffers")
    zero = "".join(f"  memset({name}, 0, sizeof {name});\n" for name in arrays)
    slave = slave.replace(API_INCLUDE, API_INCLUDE + COMPUTE_ONLY_API)
    entry = KERNEL_ENTRY.search(slave)
    assert entry is not None
    body = f"#ifdef SWTUNE_COMPUTE_ONLY\n{zero}#endif\n"
    out = slave[:entry.end()] + body + slave[entry.end():]
    return out if "#include <string.h>" in out else "#include <string.h>\n" + out


def model_figures(space, config: dict) -> dict[str, float]:
    """The simulator's seconds (host pad + spawn to join, as SWTUNE_KERNEL_SECONDS) for the full kernel and
    for its compute-only twin."""
    b = breakdown(space, config)
    s, total = b["seconds"], b["total_s"]
    assert isinstance(s, dict) and isinstance(total, float)
    compute = s["p0_compute"] + s["p1_traffic"] + s["loop_overhead"] + s["share"] + s["tile_overhead"]
    dma = s["exposed_dma"] + s["put_c"] + s["dma_hidden_excess"]
    return {"full_kernel_s": total, "compute_only_s": compute + s["spawn_join"] + s["host_prepass"],
            "dma_not_hidden_s": dma, **{f"{k}_s": v for k, v in s.items()},
            "peak_fraction": space.workload.flops / total / space.target.peak_flops(space.workload.dtype)}


def emulate(directory: Path, workload, target, compute_only: bool) -> dict:
    """Build one variant with gcc against swemu and run it: its exit status, DMA totals and output check."""
    from tuner.codegen.emulator.build import build_kernel, compile_emulator, launch

    pro = target.family is Family.SW26010_PRO
    with tempfile.TemporaryDirectory(prefix="swtune_split_") as tmp:
        emu = compile_emulator(tmp, cflags=("-O2", "-Wno-psabi"))
        prog = build_kernel(directory, Path(tmp) / "kernel_emu", pro=pro,
                            defines=["-DSWTUNE_COMPUTE_ONLY"] if compute_only else [],
                            cflags=("-O2", "-Wno-psabi"), emulator_object=emu)
        inputs = random_inputs(workload, np.random.default_rng(0))
        files = [Path(tmp) / f"in{i}.bin" for i in range(len(inputs))]
        for x, f in zip(inputs, files):
            x.tofile(f)
        run = launch([prog, *files, Path(tmp) / "c.bin"], cwd=tmp, wait_s=300, target=target, timeout="120",
                     report=Path(tmp) / "report.json", ldm_bytes=target.ldm_bytes)
        report = json.loads((Path(tmp) / "report.json").read_text())
        out = np.fromfile(Path(tmp) / "c.bin", dtype=workload.dtype) if run.returncode == 0 else np.zeros(0)
    totals = report.get("totals", {})
    result = {"returncode": run.returncode, "errors": report.get("errors", []),
              "dma": {k: totals.get(k) for k in ("get_reqs", "get_bytes", "put_reqs", "put_bytes")}}
    if not compute_only and run.returncode == 0:
        ref = reference(workload, *inputs)
        tol = RTOL[workload.dtype] * max(float(np.abs(ref).max()), 1e-30)
        result["matches_numpy"] = bool(out.size == ref.size and np.allclose(out.reshape(ref.shape), ref,
                                                                             rtol=RTOL[workload.dtype], atol=tol))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/out/split_kernel", help="directory to write the two kernels to")
    parser.add_argument("--config", help="a config as JSON (default: the best of a short search)")
    parser.add_argument("--sample", type=int, default=6000, help="random configs before the hill climb")
    parser.add_argument("--emulate", action="store_true", help="build and run both variants on swemu")
    args = parser.parse_args()
    workload, target = CALIBRATION_CONV, get_target("sw26010")
    space = space_for(workload, target)
    config = json.loads(args.config) if args.config else best_seconds(workload, args.sample, 2, seed=0)[1]
    src = generate(workload, target, config)
    out = Path(args.out)
    full = src.write(out / "full")
    twin = src.write(out / "compute_only")
    (twin / "slave.c").write_text(compute_only_slave(src.files["slave.c"]))
    makefile = (twin / "Makefile").read_text()
    (twin / "Makefile").write_text(makefile.replace("-slave -msimd", "-slave -msimd -DSWTUNE_COMPUTE_ONLY"))
    model = {k: round(v, 9) for k, v in model_figures(space, config).items()}
    (out / "model.json").write_text(json.dumps({"workload": workload.key, "target": target.name, "config": config,
                                                "model": model}, indent=1, sort_keys=True))
    print(f"{workload.key} on {target.name}\nconfig {json.dumps(config, sort_keys=True)}")
    print(f"wrote {full} and {twin}; model: full kernel {model['full_kernel_s'] * 1e3:.3f} ms, compute-only "
          f"{model['compute_only_s'] * 1e3:.3f} ms, DMA not hidden {model['dma_not_hidden_s'] * 1e3:.3f} ms")
    figures: dict[str, object] = {"workload": workload.key, "out": str(out), "config": config, "model": model}
    if args.emulate:
        figures["emulator"] = {"full": emulate(full, workload, target, False),
                               "compute_only": emulate(twin, workload, target, True)}
        print(f"emulator: {json.dumps(figures['emulator'], sort_keys=True)}")
    emit(figures)


if __name__ == "__main__":
    main()
