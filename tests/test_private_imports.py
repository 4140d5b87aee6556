"""No module of ours imports another module's private (``_name``) names.

Every module of the packages below is parsed with ``ast``; a ``from x import _y`` (the imported
name, not its alias: ``import database_url as _url`` renames a public name and is fine) fails when
``x`` is one of our modules. A private name of a third-party module (tvm's) is out of scope, and so
are dunder names (``__version__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tuner", "cost_model", "db", "service", "cli", "swtune")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a ``from ... import`` reads, a relative import resolved against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """``module:line imports _name from source`` for each private name the code of ``module``
    imports from another module of our packages."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        origin = _source_module(node, module, is_package)
        if origin.split(".")[0] not in PACKAGES or origin == module:
            continue
        found += [f"{module}:{node.lineno} imports {a.name} from {origin}" for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES if (ROOT / pkg).is_dir() for p in (ROOT / pkg).rglob("*.py"))


def test_the_walk_sees_every_package() -> None:
    names = {_module_name(p).split(".")[0] for p in _modules()}
    assert {"tuner", "cost_model", "db", "service", "cli"} <= names


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [f for p in _modules()
             for f in private_imports(p.read_text(), _module_name(p), p.name == "__init__.py")]
    assert not found, "\n".join(found)


def test_multiline_and_relative_imports_are_read_and_aliases_ignored() -> None:
    source = ("from tuner.ir.graph import (\n    AotError,\n    _hidden,\n)\n"
              "from .sibling import _other\n"
              "from ..graph import _up\n"
              "from cli.x import public as _renamed\n"
              "from tvm.relax import _ffi_api\n"
              "from tuner.ir import __version__\n")
    assert private_imports(source, "tuner.ir.probe") == [
        "tuner.ir.probe:1 imports _hidden from tuner.ir.graph",
        "tuner.ir.probe:5 imports _other from tuner.ir.sibling",
        "tuner.ir.probe:6 imports _up from tuner.graph"]
    # in a package's __init__ a single dot is the package itself
    assert private_imports("from .sub import _x\n", "tuner.ir", is_package=True) == [
        "tuner.ir:1 imports _x from tuner.ir.sub"]
