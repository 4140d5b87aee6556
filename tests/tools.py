"""The outside tools some tests need (gcc, make, binutils, node, chromium, MPICH), found in one place.

A test says what it needs with ``@pytest.mark.needs("gcc", "make")`` (or calls :func:`require` from a
fixture). Where a tool is missing the test is skipped, naming the tool and how to install it -- except
under ``CI=true``, where it fails: `.ci/run` installs every tool, so a missing one is a broken install,
not a reason to pass with a part of the suite left out.
"""

from __future__ import annotations

import os
import shutil

import pytest

# how each tool is installed on Debian (what .ci/run runs as root)
INSTALL = {
    "gcc": "apt-get install -y gcc",
    "make": "apt-get install -y make",
    "nm": "apt-get install -y binutils",
    "objcopy": "apt-get install -y binutils",
    "node": "apt-get install -y nodejs",
    "chromium": "apt-get install -y chromium",
    "mpicc": "apt-get install -y mpich libmpich-dev",
    "mpirun": "apt-get install -y mpich libmpich-dev",
}


def chromium() -> str | None:
    """Debian's chromium (or $SWTUNE_CHROMIUM), which playwright drives headless."""
    for path in (os.environ.get("SWTUNE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def find(tool: str) -> str | None:
    """The path of ``tool``, or None where this machine lacks it."""
    if tool == "chromium":
        return chromium()
    if tool == "gcc":
        return shutil.which(os.environ.get("CC") or "gcc")
    return shutil.which(tool)


def missing(*tools: str) -> list[str]:
    return [t for t in tools if find(t) is None]


def require(*tools: str) -> None:
    """Skip the calling test where a tool is missing; under CI=true, fail it."""
    absent = missing(*tools)
    if not absent:
        return
    how = "; ".join(sorted({INSTALL.get(t, f"install {t}") for t in absent}))
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true and {', '.join(absent)} is missing: .ci/run installs it ({how})", pytrace=False)
    pytest.skip(f"needs {', '.join(absent)} ({how})")
