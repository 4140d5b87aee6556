"""The strong reference optimum of each benchmark workload, kept in benchmarks/data/reference.json.

    python benchmarks/reference.py [--all] [--sample 200000] [--starts 50]

Per (variant, target, workload), noise-free (``objective.Objective.true``):
- exhaustive over every config when the space has at most ``EXHAUSTIVE_LIMIT`` knob combinations
  (evaluated in chunks, never held in memory at once);
- otherwise the best of a ``--sample`` random sample, hill-climbed from its ``--starts`` best configs
  (steepest descent over every single-knob change plus random two-knob changes, until no move helps);
- and, whenever a benchmark run measures a config better than the stored one, that config
  (``refresh``): the file says for every entry how its figure was found.
The stored entries carry a fingerprint of the simulator's source, so a changed simulator is noticed
(``load`` refuses stale entries) and this script recomputes them. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import hashlib
import json
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import _common  # noqa: F401
import numpy as np
from _common import ROOT, emit
from objective import Objective, Variant
from workload_suite import suite

from tuner.search.neighbourhood import single_knob_moves
from tuner.space import ScheduleSpace
from tuner.space.analysis import analyze
from tuner.space.factory import space_for

PROCEDURE = ("per workload and variant, noise-free: exhaustive when the space has at most 20M knob "
             "combinations, else the best of a 200,000-config random sample hill-climbed from its 50 best "
             "(single-knob + random two-knob moves), refreshed whenever a benchmark run measures better")
DATA = ROOT / "benchmarks" / "data" / "reference.json"
EXHAUSTIVE_LIMIT = 20_000_000
# every module that decides a config's validity or time: the whole space package (the compute model,
# knob choices and epilogues included), the simulator with its DMA fit and data, the targets' figures
# and the objective (the backends, registry and sunway runner do not change a simulated time)
_MODEL_SOURCES = (*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tuner" / "space").glob("*.py")),
                  "tuner/measure/simulator.py", "tuner/dma_model.py", "tuner/measure/calibration.py",
                  *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tuner/measure/calibration_data").glob("*")),
                  "tuner/targets.py", "benchmarks/objective.py")


@functools.cache
def fingerprint() -> str:
    """Hash of the sources that decide a config's time: a changed simulator makes old entries stale.

    Taken once per process, when first asked: the code a process runs is the code it imported, so a
    run that outlives an edit of the simulator stamps its entries with the old hash (stale for the
    next run) instead of labelling figures of the old model with the new sources' hash."""
    h = hashlib.sha256()
    for rel in _MODEL_SOURCES:
        path = ROOT / rel
        h.update(rel.encode())
        h.update(path.read_bytes() if path.exists() else b"-")
    return h.hexdigest()[:16]


def entry_key(variant: Variant | str, space: ScheduleSpace) -> str:
    return f"{Variant(variant).value}:{space.target.name}:{space.workload.key}"


@contextmanager
def _locked():
    """Serialise read-modify-write of the data file between concurrent benchmark processes."""
    with open(Path(tempfile.gettempdir()) / "swtune-reference.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read() -> dict:
    return json.loads(DATA.read_text()) if DATA.exists() else {"fingerprint": "", "entries": {}}


def _write(data: dict) -> None:
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def load(variant: Variant | str, space: ScheduleSpace) -> dict | None:
    """The stored entry (``seconds``, ``config``, ``how``) if it is current, else None."""
    data = _read()
    if data.get("fingerprint") != fingerprint():
        return None
    return data["entries"].get(entry_key(variant, space))


def restamp() -> dict[str, float] | None:
    """After an edit of the sources that is meant to change no time (a refactor), re-time every stored
    entry's config under the current sources: when each equals its stored figure (relative 1e-12), the
    entries are kept under the current fingerprint and the old one is recorded as ``equivalent`` (runs
    cached under it stay valid, see ``equivalent_fingerprints``). Returns {entry: relative change}, or
    None when the file is current already. Nothing is stored when any entry moved."""
    with _locked():
        data = _read()
        old = data.get("fingerprint")
        if old == fingerprint():
            return None
        changes: dict[str, float] = {}
        for t, workload in suite(quick=False):
            space = space_for(workload, t)
            for variant in Variant:
                entry = data["entries"].get(entry_key(variant, space))
                if entry is None:
                    continue
                now = float(Objective(space, variant, noise=0.0).true(space.encode(entry["config"]))[0])
                changes[entry_key(variant, space)] = now / entry["seconds"] - 1.0
        if changes and len(changes) == len(data["entries"]) and all(abs(c) < 1e-12 for c in changes.values()):
            data["equivalent"] = sorted({*data.get("equivalent", []), old})
            data["fingerprint"] = fingerprint()
            _write(data)
        return changes


def equivalent_fingerprints() -> set[str]:
    """The current fingerprint and the older ones ``restamp`` found to give identical times."""
    data = _read()
    if data.get("fingerprint") != fingerprint():
        return {fingerprint()}
    return {fingerprint(), *data.get("equivalent", [])}


def ensure(variant: Variant | str, space: ScheduleSpace, sample: int = 200_000, starts: int = 50) -> dict:
    """The current entry, computed and stored first when it is missing or stale."""
    entry = load(variant, space)
    if entry is not None:
        return entry
    entry = compute(space, Variant(variant), sample, starts)
    with _locked():
        data = _read()
        if data.get("fingerprint") != fingerprint():
            data = {"fingerprint": fingerprint(), "entries": {}, "procedure": PROCEDURE}
        old = data["entries"].get(entry_key(variant, space))
        if old is None or old["seconds"] > entry["seconds"]:
            data["entries"][entry_key(variant, space)] = entry
        _write(data)
        return data["entries"][entry_key(variant, space)]


def refresh(variant: Variant | str, space: ScheduleSpace, seconds: float, row: np.ndarray, how: str) -> bool:
    """Store a better config found by a run; True when it beat the stored reference."""
    with _locked():
        return _refresh(variant, space, seconds, row, how)


def _refresh(variant: Variant | str, space: ScheduleSpace, seconds: float, row: np.ndarray, how: str) -> bool:
    data = _read()
    if data.get("fingerprint") != fingerprint():
        return False
    key = entry_key(variant, space)
    old = data["entries"].get(key)
    if old is not None and old["seconds"] <= seconds:
        return False
    entry = dict(old or {})
    entry.update(seconds=float(seconds), config=space.decode(np.asarray(row)), how=f"{how} (refreshed)")
    data["entries"][key] = entry
    _write(data)
    return True


def exhaustive_best(objective: Objective, chunk: int = 200_000) -> tuple[float, np.ndarray]:
    space = objective.space
    best, best_row = np.inf, None
    for start in range(0, space.size, chunk):
        flat = np.arange(start, min(start + chunk, space.size))
        idx = np.stack(np.unravel_index(flat, tuple(space.sizes)), axis=1).astype(np.int64)
        idx = idx[analyze(space, idx).valid]
        if len(idx) == 0:
            continue
        t = objective.true(idx)
        i = int(np.argmin(t))
        if t[i] < best:
            best, best_row = float(t[i]), idx[i]
    assert best_row is not None, "a space without a valid config"
    return best, best_row


def hill_climb(objective: Objective, starts: np.ndarray, rng: np.random.Generator, pair_moves: int = 256,
               max_steps: int = 200) -> tuple[float, np.ndarray]:
    """Steepest descent from each start over single-knob and random two-knob moves; best end point."""
    space = objective.space
    best, best_row = np.inf, starts[0]
    for row in starts:
        current = float(objective.true(row)[0])
        for _ in range(max_steps):
            cand = single_knob_moves(space, row[None, :], valid_only=False)
            pairs = space.neighbours(np.repeat(cand, max(pair_moves // len(cand), 1), axis=0), rng, n_moves=1)
            cand = np.concatenate([cand, pairs])
            t = objective.true(cand)
            i = int(np.argmin(t))
            if not t[i] < current * (1 - 1e-12):
                break
            current, row = float(t[i]), cand[i]
        if current < best:
            best, best_row = current, row
    return best, best_row


def compute(space: ScheduleSpace, variant: Variant, sample: int, starts: int, seed: int = 12345) -> dict:
    objective = Objective(space, variant, noise=0.0)
    began = time.perf_counter()
    if space.size <= EXHAUSTIVE_LIMIT:
        seconds, row = exhaustive_best(objective)
        how = f"exhaustive over {space.size} knob combinations"
    else:
        rng = np.random.default_rng(seed)
        rows = space.sample(sample, rng)
        t = objective.true(rows)
        order = np.argsort(t)[:starts]
        sampled = float(t[order[0]])
        seconds, row = hill_climb(objective, rows[order], rng)
        how = (f"best of {len(rows)} random configs ({sampled * 1e3:.4f} ms) hill-climbed from its {starts} best "
               f"(single-knob + random two-knob moves)")
    return {"seconds": float(seconds), "config": space.decode(row), "how": how,
            "compute_s": round(time.perf_counter() - began, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--all", action="store_true", help="the full suite, not only the --quick workloads")
    parser.add_argument("--sample", type=int, default=200_000)
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--force", action="store_true", help="recompute entries that are current")
    parser.add_argument("--restamp", action="store_true",
                        help="sources changed without changing a time: check every stored entry, keep them if equal")
    args = parser.parse_args()
    if args.restamp:
        changes = restamp()
        same = changes is not None and bool(changes) and all(abs(c) < 1e-12 for c in changes.values())
        emit({"fingerprint": fingerprint(), "current_already": changes is None, "checked": len(changes or {}),
              "identical": same, "max_rel_change": max((abs(c) for c in (changes or {}).values()), default=0.0)})
        return
    data = _read()
    fp = fingerprint()
    if data.get("fingerprint") != fp:
        data = {"fingerprint": fp, "entries": {}}
    data["procedure"] = PROCEDURE
    computed = {}
    for target, workload in suite(quick=not args.all):
        space = space_for(workload, target)
        for variant in Variant:
            key = entry_key(variant, space)
            old = data["entries"].get(key)
            if old is not None and not args.force:
                continue
            entry = compute(space, variant, args.sample, args.starts)
            with _locked():
                data = _read() if _read().get("fingerprint") == fp else data
                data["procedure"] = PROCEDURE
                old = data["entries"].get(key)
                if old is not None and old["seconds"] < entry["seconds"]:
                    entry = old  # a run found better earlier: keep it
                data["entries"][key] = entry
                _write(data)
            computed[key] = entry["seconds"]
            print(f"{key}: {entry['seconds'] * 1e3:.4f} ms  [{entry['how']}, {entry['compute_s']} s]", flush=True)
    emit({"fingerprint": fp, "entries": len(data["entries"]), "computed": computed})


if __name__ == "__main__":
    main()
