"""Shared helpers of the expression-path tests: the repository's example operators."""

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES
