"""The documentation stays true to the code: docs/architecture.md's layer stack and module list are what
scripts/architecture_docs.py prints from pyproject.toml's contracts and the modules' docstrings, and
every relative link of the README and docs/ leads to a file of the repository, and the reference pages
list every model family, trainable model, novel network and command the code has."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture_docs", ROOT / "scripts" / "architecture_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_architecture_page_is_what_the_script_prints() -> None:
    docs = _script()
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert page == docs.render_page(page), "out of date: run python scripts/architecture_docs.py"


def test_the_architecture_page_lists_every_module() -> None:
    docs = _script()
    page = (ROOT / "docs" / "architecture.md").read_text()
    modules = [p.relative_to(ROOT).as_posix() for p in docs.modules()]
    assert len(modules) > 100 and "cli/app.py" in modules and "db/migrations/env.py" in modules
    assert [m for m in modules if f"- `{m}`: " not in page] == []


def test_the_layer_stack_is_the_contracts() -> None:
    docs = _script()
    layers = docs.render_layers()
    for _, _, stack in docs.layer_contracts():
        for layer in stack:
            assert (" | " if layer.independent else " : ").join(layer.names) in layers
    assert "tuner ─┬─ tune_expr" in layers and "\n└─" not in layers


def test_a_first_sentence_ends_at_a_full_stop_before_a_capital(tmp_path: Path) -> None:
    docs = _script()
    module = tmp_path / "m.py"
    module.write_text('"""Workloads (conv2d incl. depthwise, e.g. a 3x3): keys.\n\nMore. Text."""\n')
    assert docs.first_sentence(module) == "Workloads (conv2d incl. depthwise, e.g. a 3x3): keys"
    module.write_text('"""Does it fit? Then yes.\nMore."""\n')
    assert docs.first_sentence(module) == "Does it fit?"
    module.write_text("x = 1\n")
    assert docs.first_sentence(module) == "(no docstring)"


def test_every_relative_link_of_the_docs_leads_to_a_file() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_reference_pages_list_what_the_code_has() -> None:
    """Every model family, trainable model, novel network and command is in its docs/ page."""
    import typer

    from cli.app import build_app
    from tuner.models.torch_models import TORCH_MODELS
    from tuner.models.trainable import TRAINABLE

    models = (ROOT / "docs" / "models.md").read_text()
    assert [f for f in TORCH_MODELS if f"`{f}`" not in models] == []
    assert f"one of {len(TORCH_MODELS)} families" in models
    training = (ROOT / "docs" / "training.md").read_text()
    assert [m for m in TRAINABLE if f"`{m}`" not in training] == []
    networks = sorted(p.name for p in (ROOT / "examples" / "novel").glob("*.py") if not p.name.startswith("_"))
    assert networks and [n for n in networks if f"| `{n}` |" not in training] == []
    commands = typer.main.get_command(build_app()).commands  # a click Group
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert [c for c in commands if f"`swtune {c}" not in cli] == []
