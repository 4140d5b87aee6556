"""The import graph of swtune's packages (grimp, what import-linter reads; imports inside functions
count, imports under ``if TYPE_CHECKING:`` do not, since they never run): no module imports itself
through others, and nothing outside the kinds branches on which kind of task it holds.
The layer rules themselves are import-linter contracts in pyproject.toml, run by .ci/run."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

PACKAGES = ("tuner", "cost_model", "db", "service", "swtune", "cli")
ROOT = Path(__file__).resolve().parents[2]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert sum(map(len, edges.values())) > 500  # the graph really was read
    assert _cycles(edges) == []


def test_nothing_outside_the_kinds_branches_on_the_kind_of_a_task() -> None:
    branch = re.compile(r"CPE_KERNEL_OP|EXPR_OP|isinstance\(space, ScheduleSpace\)|"
                        r"\.op\s*[!=]=\s*[\"'](expr|cpe_kernel)[\"']")
    hits = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.is_relative_to(ROOT / "tuner" / "kinds"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if branch.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == []

