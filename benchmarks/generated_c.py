"""Hashes of the generated host.c and slave.c of every zoo model: the check that a refactor changed
no generated program.

Usage: python benchmarks/generated_c.py [--only alexnet,...] [--compare FILE] [--out FILE]

Each zoo model (at the reduced sizes of benchmarks/model_coverage.py) is compiled twice for the SW26010:
untuned (every kernel at its fallback or analysed schedule) and with a sampled config per task (one
valid config of each task's space, drawn with a seed from its workload key, so GEMM-like kernels,
expression kernels and CPE kernels all run a non-default configuration). ``--out`` writes the hashes
as JSON; ``--compare`` reads such a file and lists the files that differ. Last line: one JSON object
(``files``, ``identical`` when comparing, ``differ``, ``combined``: one hash over every file's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import tempfile
import zlib
from pathlib import Path

import numpy as np
from _common import emit  # noqa: F401  (also puts the checkout on sys.path)
from model_coverage import MODELS as COVERAGE_MODELS

TARGET = "sw26010"
# every zoo model, at benchmarks/model_coverage.py's reduced (width, image)
MODELS = {name: (width, image) for name, (_, width, image) in COVERAGE_MODELS.items() if not name.startswith("onnx_")}


def model_hashes(name: str) -> dict[str, str]:
    from tuner.aot.compiler import compile_model
    from tuner.bridge.extract import extract_relax, torch_to_relax
    from tuner.models.torch_models import build
    from tuner.space.factory import space_for

    width, image = MODELS[name]
    module, inputs = build(name, width=width, image=image) if image else build(name, width=width)
    mod = torch_to_relax(module, inputs)
    sampled = {}
    for w in extract_relax(mod).workloads:
        space = space_for(w, TARGET)
        rows = space.sample(1, np.random.default_rng(zlib.crc32(w.key.encode())))
        if len(rows):
            sampled[w.key] = space.decode(rows[0])
    out = {}
    for mode, lookup in (("untuned", lambda w: None), ("sampled", lambda w: sampled.get(w.key))):
        with tempfile.TemporaryDirectory() as d:
            compile_model(mod, TARGET, d, lookup)
            for f in ("host.c", "slave.c"):
                out[f"{name}/{mode}/{f}"] = hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()[:16]
    print(f"{name}: {len(sampled)} tasks sampled", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--compare", default="", help="a JSON file of hashes written by --out")
    parser.add_argument("--out", default="", help="write the hashes here as JSON")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the compiler's fallback warnings: expected, there is no tuning log
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    hashes: dict[str, str] = {}
    for name in names:
        hashes.update(model_hashes(name))
    if args.out:
        Path(args.out).write_text(json.dumps(hashes, indent=1, sort_keys=True))
    figures: dict[str, object] = {"files": len(hashes), "combined": hashlib.sha256(
        json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]}
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        differ = sorted(k for k in hashes if before.get(k) != hashes[k])
        figures.update(identical=not differ and set(before) >= set(hashes), differ=differ)
    emit(figures)


if __name__ == "__main__":
    main()
