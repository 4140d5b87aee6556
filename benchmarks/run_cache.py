"""Finished runs of the search benchmark, one JSON line each, so pieces of a benchmark merge and resume.

A run is identified by what decides its outcome: method, variant, workload (target and key), seed, trial
cap, noise, the reference fingerprint (the simulator's sources, ``reference.fingerprint``) and the
fingerprint of the method's own code and options (``code_fingerprint``). Separate processes (say one
running only the slow peers with fewer seeds) append to the same file; any process reads every line
whose identity matches its own settings, so an interrupted run continues where it stopped and the
last process summarises all of them. A line of another fingerprint is stale and never reused, unless
``reference.restamp`` checked that the sources it names give the same times (``equivalent``), or
``restamp_code`` checked that the method's code differs from the code that ran it in docstrings and
comments only (``benchmarks/data/code_equivalents.json``: a package docstring edit must not throw away
hours of peer runs).

A run that stops at 95% of the reference it knew keeps its curve: it is re-scored against the current
reference, and reused only while the current goal is one it reached or the run went to the cap (a
refreshed, lower reference makes an early-stopped run too short, so it runs again).
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import math
import subprocess
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import _common

SEARCH_SOURCES = ("tuner/search", "cost_model")  # what ours (and ours with transfer) run
PEER_SOURCES = ("benchmarks/peers.py",)
RANDOM_SOURCES = ("tuner/search/base.py",)


CODE_EQUIVALENTS = _common.ROOT / "benchmarks" / "data" / "code_equivalents.json"
METHODS = ("ours", "ours_transfer", "random", "optuna_tpe", "nevergrad_de", "smac", "skopt_et")


def _sources(method: str) -> tuple[str, ...]:
    if method in ("ours", "ours_transfer"):
        return SEARCH_SOURCES
    return RANDOM_SOURCES if method == "random" else PEER_SOURCES


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(_common.ROOT), *args], check=True, capture_output=True,
                          text=True).stdout


def _files(rels: tuple[str, ...], rev: str | None = None) -> list[tuple[str, bytes | None]]:
    """(path, contents) of every .py file under ``rels``, in the work tree or at git revision ``rev``."""
    out: list[tuple[str, bytes | None]] = []
    for rel in rels:
        if rev is None:
            path = _common.ROOT / rel
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            out += [(str(f.relative_to(_common.ROOT)), f.read_bytes() if f.exists() else None) for f in files]
            continue
        names = sorted(n for n in _git("ls-tree", "-r", "--name-only", rev, "--", rel).split() if n.endswith(".py"))
        if not names:
            out.append((rel, None))
        out += [(n, _git("show", f"{rev}:{n}").encode()) for n in names]
    return out


def _fingerprint(method: str, options: dict[str, Any], rev: str | None = None) -> str:
    h = hashlib.sha256()
    for name, data in _files(_sources(method), rev):
        h.update(name.encode())
        h.update(data if data is not None else b"-")
    if method in ("ours", "ours_transfer"):
        h.update(json.dumps(options, sort_keys=True).encode())
    h.update(method.encode())
    return h.hexdigest()[:16]


def code_fingerprint(method: str, options: dict[str, Any]) -> str:
    """Hash of the code (and, for ours, the options) a method's runs depend on."""
    return _fingerprint(method, options)


def _code_only(data: bytes | None) -> str:
    """The module's syntax tree without docstrings (comments are not in it): what runs."""
    if data is None:
        return "-"
    tree = ast.parse(data)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _equivalents() -> dict[str, dict[str, list[str]]]:
    return json.loads(CODE_EQUIVALENTS.read_text()) if CODE_EQUIVALENTS.exists() else {}


def equivalent_codes(method: str, options: dict[str, Any]) -> set[str]:
    """The current code fingerprint and the older ones ``restamp_code`` found to differ in docstrings
    and comments only."""
    current = code_fingerprint(method, options)
    return {current, *_equivalents().get(method, {}).get(current, [])}


def restamp_code(rev: str) -> dict[str, str]:
    """For each method (default options), compare its code at git revision ``rev`` with the work tree:
    ``unchanged``, ``equivalent`` (docstrings and comments only: the old fingerprint is recorded as
    equivalent to the current one, so runs stored under it stay valid) or ``changed``."""
    data = _equivalents()
    verdicts = {}
    for method in METHODS:
        old, new = _fingerprint(method, {}, rev), code_fingerprint(method, {})
        if old == new:
            verdicts[method] = "unchanged"
            continue
        before, now = _files(_sources(method), rev), _files(_sources(method))
        same = [n for n, _ in before] == [n for n, _ in now] and all(
            _code_only(a) == _code_only(b) for (_, a), (_, b) in zip(before, now))
        verdicts[method] = "equivalent" if same else "changed"
        if same:
            known = data.setdefault(method, {})
            known[new] = sorted({old, *known.get(old, []), *known.get(new, [])})
    CODE_EQUIVALENTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return verdicts


class RunKey(NamedTuple):
    """What identifies a stored run (the module docstring), in the order ``run_key`` writes it."""

    method: str
    variant: str
    workload: str
    seed: int
    cap: int
    noise: float
    reference: str
    code: str


def run_key(method: str, variant: str, workload: str, seed: int, cap: int, noise: float, reference: str,
            code: str) -> str:
    return json.dumps(list(RunKey(method, variant, workload, seed, cap, noise, reference, code)))


def parse_key(key: str) -> RunKey:
    return RunKey(*json.loads(key))


class RunCache:
    """Append-only JSON lines of finished runs (``path`` None: nothing is read or written)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.runs: dict[str, dict[str, Any]] = {}
        self.reload()

    def reload(self) -> None:
        if self.path is None or not self.path.exists():
            return
        with open(self.path) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill mid-write: that run runs again
                    continue
                self.runs[row["key"]] = row

    def get(self, key: str, goal: float, cap: int) -> dict[str, Any] | None:
        """The stored run if it still answers the question at ``goal`` (see the module docstring)."""
        row = self.runs.get(key)
        if row is None:
            return None
        curve = row["curve"]
        if len(curve) >= cap or (curve and min(curve) <= goal):
            return row
        return None

    def put(self, key: str, row: dict[str, Any]) -> None:
        row = {**row, "key": key}
        self.runs[key] = row
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(row, allow_nan=True) + "\n"
        with open(self.path, "a") as fh:  # one locked write per line: concurrent processes do not interleave
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.write(text)
                fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def compact(self, current: Callable[[str], bool]) -> int:
        """Drop the stored runs whose key ``current`` rejects (runs of older code or simulators, kept in
        the repository otherwise for ever); returns how many were dropped. Rewritten in place under the
        same lock as ``put``, so a concurrent process's append lands after it, not in a lost copy."""
        if self.path is None or not self.path.exists():
            return 0
        with open(self.path, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                lines = [line for line in fh.read().splitlines() if line.strip()]
                kept = []
                for line in lines:
                    try:
                        key = json.loads(line)["key"]
                    except (json.JSONDecodeError, KeyError):
                        continue  # a line cut by a kill mid-write
                    if current(key):
                        kept.append(line)
                fh.seek(0)
                fh.truncate()
                fh.write("".join(line + "\n" for line in kept))
                fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        self.runs = {}
        self.reload()
        return len(lines) - len(kept)

    def matching(self, variant: str, workload: str, cap: int, noise: float, references: set[str],
                 codes: Mapping[str, str | Collection[str]] | None = None) -> list[dict[str, Any]]:
        """Every stored run of this variant and workload under these settings (``references``: the
        reference fingerprints whose times are identical; current code only: ``codes`` maps a method
        to its current code fingerprint, or to every fingerprint of equivalent code; methods not in it
        are skipped)."""
        out = []
        for key, row in self.runs.items():
            k = parse_key(key)
            if (k.variant, k.workload, k.cap) != (variant, workload, cap) or k.reference not in references \
                    or not math.isclose(k.noise, noise):
                continue
            if codes is not None:
                accepted = codes.get(k.method, ())
                if k.code not in ({accepted} if isinstance(accepted, str) else set(accepted)):
                    continue
            out.append(row)
        return out
