"""The README as a newcomer meets it: short (at most 12,000 bytes), its two commands for a fresh machine
as they are, nothing it points to outside the repository, and its Python example runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FRESH_MACHINE = [
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/swtune demo",
    "bash .ci/run",
]


def python_example(text: str) -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) == 1, "the README holds one Python example"
    return blocks[0]


def test_the_readme_is_short_and_stands_on_its_own() -> None:
    text = README.read_text()
    assert len(text.encode()) <= 12_000
    assert "http://" not in text and "https://" not in text  # nothing outside the repository
    assert text.index("```python") < text.index("## ")  # it opens with code


def test_the_readme_gives_the_two_commands_for_a_fresh_machine() -> None:
    text = README.read_text()
    section = text[text.index("## Two commands for a fresh machine"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    assert [b.strip() for b in blocks] == FRESH_MACHINE


def test_the_python_example_is_ten_to_twenty_lines() -> None:
    assert 10 <= len(python_example(README.read_text()).splitlines()) <= 20


@pytest.mark.slow
def test_the_python_example_runs_as_written(tmp_path: Path) -> None:
    """As a reader runs it: a fresh interpreter, its temporary files under this test's directory."""
    script = tmp_path / "example.py"
    script.write_text(python_example(README.read_text()))
    env = {**os.environ, "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "host.c" in result.stdout and "'speedup_vs_baseline'" in result.stdout
    assert list(tmp_path.glob("*/Makefile")), "the program is written where the example says"
