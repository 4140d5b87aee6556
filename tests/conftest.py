"""Shared fixtures: small workloads of every op; the ``needs`` marker (tests/tools.py); the run's
cache of emulator builds (tuner.codegen.emulator.cache), one directory shared by the xdist workers."""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile

import pytest
from tools import require

from tuner.ir import content_cache
from tuner.workloads import BatchMatmul, Conv2d, Dense

SMALL_WORKLOADS = {
    "dense": Dense(64, 96, 128, "float32"),
    "dense_f64": Dense(256, 256, 256, "float64"),
    "batch_matmul": BatchMatmul(4, 32, 48, 64, "float32"),
    "conv2d": Conv2d(1, 16, 14, 14, 32, 3, 3, pad_h=1, pad_w=1),
    "conv2d_strided": Conv2d(2, 8, 15, 15, 16, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1),
    "depthwise": Conv2d(1, 32, 14, 14, 32, 3, 3, pad_h=1, pad_w=1, groups=32),
}

_OWN_CACHE = pytest.StashKey[str]()

# TVM's TVMScript decorators (T.prim_func: run for each of the hundreds of intrinsics that importing
# tvm.s_tir.tensor_intrin registers, and for each parse) call inspect.stack(). For a frame of frozen or
# generated code, inspect.getmodule finds no module, and finds it again by scanning all of sys.modules
# (thousands with torch) on every call: 29 of the 36 s that import took here. These files belong to no
# module; recorded once, getmodule gives the same answer (None) without the scan.
for _code_without_module in ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>", "<ast>",
                             "<string>", "<frozen runpy>"):
    inspect.modulesbyfile.setdefault(_code_without_module, "<no module>")


def pytest_configure(config: pytest.Config) -> None:
    """One content cache (emulator builds, CPE cut checks) for the whole run: made by the first process
    (the xdist controller, before it starts its workers, which inherit the variable) and removed when
    that process ends. A directory set from outside is kept (a developer's cache across runs)."""
    if os.environ.get(content_cache.ENV):
        return
    os.environ[content_cache.ENV] = tempfile.mkdtemp(prefix="swtune-build-cache-")
    config.stash[_OWN_CACHE] = os.environ[content_cache.ENV]


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN_CACHE, None)
    if own:
        shutil.rmtree(own, ignore_errors=True)
        os.environ.pop(content_cache.ENV, None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        require(*mark.args)


@pytest.fixture(params=sorted(SMALL_WORKLOADS))
def small_workload(request):
    return SMALL_WORKLOADS[request.param]
