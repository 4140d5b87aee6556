"""The search benchmark's run cache: pieces run by separate processes merge, interrupted runs resume,
stale fingerprints are never reused, and an early-stopped run is reused only while it still answers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import run_cache  # noqa: E402
from run_cache import RunCache, code_fingerprint, parse_key, run_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _key(method="ours", seed=0, reference="fp1", code="c1", cap=1000, noise=0.02, workload="sw26010:w"):
    return run_key(method, "plain", workload, seed, cap, noise, reference, code)


def test_a_second_process_reads_what_the_first_wrote(tmp_path):
    path = tmp_path / "runs.jsonl"
    first = RunCache(path)
    first.put(_key(seed=0), {"method": "ours", "seed": 0, "curve": [3.0, 2.0, 1.0]})
    first.put(_key(method="smac", seed=0, code="p"), {"method": "smac", "seed": 0, "curve": [3.0] * 1000})
    second = RunCache(path)
    assert second.get(_key(seed=0), goal=1.5, cap=1000)["curve"] == [3.0, 2.0, 1.0]
    assert second.get(_key(method="smac", seed=0, code="p"), goal=0.1, cap=1000) is not None  # ran to the cap
    assert second.get(_key(seed=1), goal=1.5, cap=1000) is None  # never ran


def test_stale_fingerprints_and_other_settings_are_not_matched(tmp_path):
    cache = RunCache(tmp_path / "runs.jsonl")
    cache.put(_key(reference="old"), {"method": "ours", "seed": 0, "curve": [1.0]})
    assert cache.get(_key(reference="new"), goal=2.0, cap=1000) is None
    assert cache.get(_key(code="c2"), goal=2.0, cap=1000) is None
    assert cache.get(_key(reference="old", cap=600), goal=2.0, cap=600) is None
    assert cache.matching("plain", "sw26010:w", 1000, 0.02, {"new"}, {"ours": "c1"}) == []
    assert len(cache.matching("plain", "sw26010:w", 1000, 0.02, {"old", "new"}, {"ours": "c1"})) == 1
    assert cache.matching("plain", "sw26010:w", 1000, 0.02, {"old"}, {"ours": "other code"}) == []


def test_an_early_stopped_run_is_rerun_when_the_goal_drops_below_its_curve(tmp_path):
    cache = RunCache(tmp_path / "runs.jsonl")
    cache.put(_key(), {"method": "ours", "seed": 0, "curve": [5.0, 4.0]})  # stopped at its goal of 4.0
    assert cache.get(_key(), goal=4.0, cap=1000) is not None
    assert cache.get(_key(), goal=3.9, cap=1000) is None  # a refreshed reference: the run is too short


def test_a_line_cut_by_a_kill_is_skipped(tmp_path):
    path = tmp_path / "runs.jsonl"
    RunCache(path).put(_key(), {"method": "ours", "seed": 0, "curve": [1.0]})
    with open(path, "a") as fh:
        fh.write('{"key": "[\\"ours\\", \\"plain\\"')  # no newline, no end: the writer was killed
    cache = RunCache(path)
    assert len(cache.runs) == 1


def test_code_fingerprint_follows_ours_options_and_separates_methods():
    assert code_fingerprint("ours", {}) != code_fingerprint("ours", {"climb": 0.25})
    assert code_fingerprint("ours", {}) == code_fingerprint("ours", {})
    assert code_fingerprint("smac", {}) != code_fingerprint("skopt_et", {})
    assert code_fingerprint("smac", {}) == code_fingerprint("smac", {"climb": 0.25})  # peers ignore our options


def test_code_that_differs_in_docstrings_only_keeps_its_stored_runs(tmp_path, monkeypatch):
    before = b'"""Old words."""\nimport math\n\ndef f(x):\n    """About f."""\n    return math.sqrt(x)  # why\n'
    reworded = b'"""New words: what it owns."""\nimport math\n\n\ndef f(x):\n    return math.sqrt(x)\n'
    changed = b'"""Old words."""\nimport math\n\ndef f(x):\n    return math.sqrt(x) + 0\n'
    assert run_cache._code_only(before) == run_cache._code_only(reworded)
    assert run_cache._code_only(before) != run_cache._code_only(changed)
    # a recorded equivalence makes runs of the old fingerprint match the current code
    monkeypatch.setattr(run_cache, "CODE_EQUIVALENTS", tmp_path / "eq.json")
    current = code_fingerprint("ours", {})
    assert run_cache.equivalent_codes("ours", {}) == {current}
    (tmp_path / "eq.json").write_text(json.dumps({"ours": {current: ["old"]}}))
    assert run_cache.equivalent_codes("ours", {}) == {current, "old"}
    assert run_cache.equivalent_codes("ours", {"climb": 0.25}) == {code_fingerprint("ours", {"climb": 0.25})}
    cache = RunCache(tmp_path / "runs.jsonl")
    cache.put(_key(code="old"), {"method": "ours", "seed": 0, "curve": [1.0]})
    assert len(cache.matching("plain", "sw26010:w", 1000, 0.02, {"fp1"}, {"ours": {current, "old"}})) == 1
    assert cache.matching("plain", "sw26010:w", 1000, 0.02, {"fp1"}, {"ours": current}) == []


def _run(cache: Path, png: Path, methods: str, *extra: str) -> tuple[dict, str]:
    # a copy of the repository's references: a run may refresh (or, once the simulator's sources move,
    # recompute) them, and a test must not rewrite the repository's data
    references = cache.parent / "reference.json"
    if not references.exists():
        shutil.copy(ROOT / "benchmarks" / "data" / "reference.json", references)
    out = subprocess.run(
        [sys.executable, "benchmarks/search_efficiency.py", "--quick", "--workloads", "1", "--variants", "plain",
         "--cap", "24", "--seeds", "1", "--peer-seeds", "optuna_tpe=1", "--methods", methods, "--jobs", "1",
         "--cache", str(cache), "--png", str(png), "--reference", str(references), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout


def _stored_runs(cache: Path) -> int:
    return sum(json.loads(line)["method"] != "random_law" for line in cache.read_text().splitlines())


@pytest.mark.slow
def test_separate_pieces_merge_into_one_summary_and_a_rerun_reuses_them(tmp_path):
    cache, png = tmp_path / "runs.jsonl", tmp_path / "c.png"
    first, _ = _run(cache, png, "ours")
    assert first["runs"] == {"ours": 1} and first["runs_merged_from_cache"] == 0
    second, _ = _run(cache, png, "optuna_tpe")  # a peer-only piece: ours is merged from the cache
    assert second["runs"] == {"ours": 1, "optuna_tpe": 1}
    assert second["runs_merged_from_cache"] == 1
    assert set(second["ratio_peer_over_ours"]) == {"optuna_tpe"}
    assert second["seeds"] == {"ours": 1, "optuna_tpe": 1}
    assert second["median_trials_to_95"]["ours"] == first["median_trials_to_95"]["ours"]
    third, log = _run(cache, png, "ours,optuna_tpe")  # everything stored: nothing runs again
    assert third["runs_merged_from_cache"] == 2 and "(cached)" in log
    assert third["median_trials_to_95"] == second["median_trials_to_95"]
    assert _stored_runs(cache) == 2
    laws = [json.loads(line) for line in cache.read_text().splitlines() if "random_law" in line]
    assert len(laws) == 1  # random's 200k-sample law: computed by the first piece, read by the others
    merged, _ = _run(cache, png, "ours,optuna_tpe,smac", "--summary-only")  # smac was never run: nothing runs
    assert merged["runs"] == {"ours": 1, "optuna_tpe": 1} and _stored_runs(cache) == 2


def test_restamp_keeps_entries_whose_times_are_unchanged_and_nothing_else(tmp_path, monkeypatch):
    """A refactor changes the sources' fingerprint but no time: the stored entries are re-timed, kept
    under the new fingerprint, and runs cached under the old one become reusable (equivalent)."""
    import reference
    from objective import Objective, Variant
    from workload_suite import suite

    from tuner.space.factory import space_for

    target, workload = suite(True)[1]
    space = space_for(workload, target)
    row = space.sample(1, __import__("numpy").random.default_rng(0))[0]
    seconds = float(Objective(space, Variant.PLAIN, noise=0.0).true(row)[0])
    key = reference.entry_key(Variant.PLAIN, space)
    monkeypatch.setattr(reference, "DATA", tmp_path / "reference.json")
    monkeypatch.setattr(reference, "fingerprint", lambda: "new")

    def store(s: float) -> None:
        reference._write({"fingerprint": "old", "entries": {key: {"seconds": s, "config": space.decode(row),
                                                                   "how": "test"}}})

    store(seconds * 1.01)  # the sources changed a time: nothing is kept
    changes = reference.restamp()
    assert changes is not None and abs(changes[key] + 0.01 / 1.01) < 1e-9
    assert reference._read()["fingerprint"] == "old" and reference.equivalent_fingerprints() == {"new"}
    store(seconds)
    assert reference.restamp() == {key: 0.0}
    assert reference._read()["fingerprint"] == "new"
    assert reference.load(Variant.PLAIN, space)["seconds"] == seconds
    assert reference.equivalent_fingerprints() == {"new", "old"}
    assert reference.restamp() is None  # current already


def test_compact_drops_stale_runs_and_keeps_appends_of_other_processes(tmp_path):
    path = tmp_path / "runs.jsonl"
    cache = RunCache(path)
    cache.put(_key(reference="old"), {"method": "ours", "seed": 0, "curve": [1.0]})
    cache.put(_key(reference="new"), {"method": "ours", "seed": 0, "curve": [2.0]})
    cache.put(_key(reference="new", code="c0"), {"method": "ours", "seed": 0, "curve": [3.0]})
    other = RunCache(path)  # another process, opened before the compaction
    assert cache.compact(lambda key: parse_key(key).reference == "new" and parse_key(key).code == "c1") == 2
    other.put(_key(reference="new", seed=1), {"method": "ours", "seed": 1, "curve": [4.0]})
    reread = RunCache(path)
    assert set(reread.runs) == {_key(reference="new"), _key(reference="new", seed=1)}
    assert len(path.read_text().splitlines()) == 2
