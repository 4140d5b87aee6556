"""Build a compiled model's program with `make emu` and run it on swemu (the AOT tests' one runner)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.codegen.emulator.build import launch
from tuner.codegen.emulator.cache import make_emulated


@dataclass(frozen=True)
class EmuRun:
    output: np.ndarray  # the program's output file, flat (float32, or the dtype run with)
    report: dict[str, Any]  # swemu's report: status, errors, DMA totals
    stdout: str


def run_model(out: Path, inputs: list[np.ndarray], target: str = "sw26010", dtype: type = np.float32) -> EmuRun:
    """`make emu` in ``out``, then ``./model_emu weights.bin in0.bin ... output.bin``; asserts both succeed.
    ``dtype``: the model's (inputs written and the output read in it)."""
    build = make_emulated(out, "emu", timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    names = []
    for i, a in enumerate(inputs):  # integer and bool inputs (token ids, masks) in their own dtype
        a = np.asarray(a)
        np.ascontiguousarray(a, dtype=a.dtype if a.dtype.kind in "iub" else dtype).tofile(out / f"in{i}.bin")
        names.append(f"in{i}.bin")
    run = launch(["./model_emu", "weights.bin", *names, "output.bin"], cwd=out, wait_s=300, target=target,
                 timeout="60", report=out / "report.json")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return EmuRun(np.fromfile(out / "output.bin", dtype=dtype),
                  json.loads((out / "report.json").read_text()), run.stdout)


def assert_outputs_match(got: np.ndarray, refs: list[np.ndarray], names: list[str], rtol: float = 1e-3,
                         atol: float = 1e-5) -> None:
    """A program with several outputs writes them one after another into its one output file: ``got``,
    flat, holds each of ``refs`` in turn (each named in its failure by ``names``)."""
    assert got.size == sum(r.size for r in refs)
    pos = 0
    for name, ref in zip(names, refs, strict=True):
        part = got[pos:pos + ref.size].reshape(ref.shape)
        pos += ref.size
        np.testing.assert_allclose(part, ref, rtol=rtol, atol=atol, err_msg=name)
