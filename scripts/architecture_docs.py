"""The generated parts of docs/architecture.md: the layer stack, read from pyproject.toml's import-linter
contracts (the one place it is written), and the module list, the first sentence of every module's
docstring.

    python scripts/architecture_docs.py            # rewrite both parts in docs/architecture.md
    python scripts/architecture_docs.py --check    # exit 1, with a diff, when the page is out of date
    python scripts/architecture_docs.py --layers   # print the layer stack (Markdown)

Each part sits between a pair of marker comments (``<!-- BEGIN GENERATED: layers -->`` ... ``<!-- END
GENERATED: layers -->``, the same for ``modules``); the prose around them is written by hand and kept.
tests/test_docs.py fails when the page differs from what this script writes.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
SCRIPT = "scripts/architecture_docs.py"
PARTS = ("layers", "modules")
# a sentence ends at a full stop followed by a capital letter (not "incl. depthwise", not "e.g. the")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def contracts(root: Path = ROOT) -> list[dict]:
    """pyproject.toml's import-linter contracts, in their order."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    return list(config["contracts"])


def root_packages(root: Path = ROOT) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    return list(config["root_packages"])


def first_sentence(path: Path) -> str:
    """The first sentence of the module's docstring (its first paragraph when that has one sentence),
    on one line and without its full stop; "(no docstring)" when it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        return "(no docstring)"
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = _SENTENCE_END.split(paragraph, maxsplit=1)[0]
    return sentence[:-1] if sentence.endswith(".") else sentence


def module_file(root: Path, dotted: str) -> Path | None:
    """The file that holds a package's or module's docstring: ``a/b/__init__.py`` or ``a/b.py``."""
    base = root.joinpath(*dotted.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.exists():
            return path
    return None


def _split(layer: str) -> tuple[list[str], bool]:
    """The modules of one entry of a layers contract, and whether they are independent of each other
    (``a | b``) rather than merely side by side (``a : b``)."""
    independent = "|" in layer
    return [name.strip() for name in re.split(r"[|:]", layer)], independent


@dataclass(frozen=True)
class Layer:
    names: list[str]  # dotted modules of one layer (several: side by side)
    independent: bool


def layer_contracts(root: Path = ROOT) -> list[tuple[str, list[str], list[Layer]]]:
    """(name, containers, layers highest first) of every ``layers`` contract."""
    found = []
    for contract in contracts(root):
        if contract["type"] != "layers":
            continue
        containers = list(contract.get("containers", []))
        layers = []
        for entry in contract["layers"]:
            names, independent = _split(entry)
            layers.append(Layer(names, independent))
        found.append((contract["name"], containers, layers))
    return found


def _tree(layers: list[Layer], prefix: str, nested: dict[str, list[Layer]]) -> list[list[str]]:
    """One item (its lines) per layer, highest first; a container's layers branch off its name."""
    items = []
    for layer in layers:
        label = (" | " if layer.independent else " : ").join(layer.names)
        lines = [label]
        for name in layer.names:
            inner = nested.get(f"{prefix}{name}")
            if not inner:
                continue
            sub = _tree(inner, f"{prefix}{name}.", nested)
            pad = " " * len(lines[0])
            grown = []
            for k, item in enumerate(sub):
                last = k == len(sub) - 1
                if k == 0:
                    grown.append(f"{lines[0]} {'───' if last else '─┬─'} {item[0]}")
                else:
                    grown.append(f"{pad}  {'└' if last else '├'}─ {item[0]}")
                grown += [f"{pad}  {' ' if last else '│'}  {line}" for line in item[1:]]
            lines = grown
        items.append(lines)
    return items


def _stack_lines(layers: list[Layer], prefix: str, nested: dict[str, list[Layer]]) -> list[str]:
    return [line for item in _tree(layers, prefix, nested) for line in item]


def render_layers(root: Path = ROOT) -> str:
    """The layer stack as Markdown: every layers contract, highest layer first (a container's layers
    drawn under it), then every other contract."""
    stacks = layer_contracts(root)
    nested = {c: layers for _, containers, layers in stacks for c in containers}
    drawn = {c for _, containers, layers in stacks if not containers for layer in layers for c in layer.names}
    lines = []
    for name, containers, layers in stacks:
        if not containers:
            lines += [f"\"{name}\", highest first:", "", "```", *_stack_lines(layers, "", nested), "```", ""]
        for c in containers:  # a container that no top-level stack holds
            if not any(c == d or c.startswith(f"{d}.") for d in drawn):
                lines += [f"\"{name}\", inside `{c}`, highest first:", "", "```",
                          *_stack_lines(nested[c], f"{c}.", nested), "```", ""]
    lines += ["`a | b`: neither imports the other; `a : b`: side by side, either may import the other.", ""]
    others = [c for c in contracts(root) if c["type"] != "layers"]
    if others:
        lines += ["The other contracts:", ""]
    for contract in others:
        if contract["type"] == "forbidden":
            text = (f"- \"{contract['name']}\": {', '.join(f'`{m}`' for m in contract['source_modules'])} "
                    f"import none of {', '.join(f'`{m}`' for m in contract['forbidden_modules'])}")
            ignored = contract.get("ignore_imports", [])
            if ignored:
                text += f"; allowed: {', '.join(f'`{i}`' for i in ignored)}"
            lines.append(text)
        else:
            rest = {k: v for k, v in contract.items() if k not in ("name", "type")}
            lines.append(f"- \"{contract['name']}\" ({contract['type']}): {rest}")
    return "\n".join(lines).rstrip() + "\n"


def modules(root: Path = ROOT) -> list[Path]:
    """Every module of the root packages (Alembic's migration scripts left out)."""
    return sorted(p for package in root_packages(root) for p in (root / package).rglob("*.py")
                  if "migrations/versions" not in p.as_posix())


def _order(path: Path) -> tuple[str, ...]:
    """A package's ``__init__.py`` first, then its modules and subpackages by name."""
    return path.parts[:-1] + (("",) if path.name == "__init__.py" else (path.name,))


def _is_single_module(root: Path, dotted: str) -> bool:
    return module_file(root, dotted) == root.joinpath(*dotted.split(".")).with_suffix(".py")


def _groups(root: Path) -> list[tuple[str, list[Path]]]:
    """Every module once, grouped by layer, highest first: a package is a group; consecutive layers
    that are single modules share one; a container's modules outside its layers (its ``__init__.py``)
    head it; a module under no package of the contracts comes last."""
    stacks = layer_contracts(root)
    nested = {c: layers for _, containers, layers in stacks for c in containers}
    top = next((layers for _, containers, layers in stacks if not containers), [])
    order = [n for layer in top for n in layer.names]
    order += [p for p in root_packages(root) if p not in order]
    left = {p.relative_to(root): p for p in modules(root)}
    groups: list[tuple[str, list[Path]]] = []

    def take(title: str, dotted: list[str]) -> None:
        """The modules left under ``dotted``, as one group."""
        found = []  # in the order of ``dotted`` (the layers' order), each package's modules by name
        for base in (Path(*d.split(".")) for d in dotted):
            found += sorted((r for r in left if r.is_relative_to(base) or r == base.with_suffix(".py")), key=_order)
        if found:
            groups.append((title, [left.pop(r) for r in found]))

    def walk(package: str) -> None:
        inner = nested.get(package)
        if not inner:
            take(package.replace(".", "/"), [package])
            return
        children = [f"{package}.{n}" for layer in inner for n in layer.names]
        bases = [Path(*d.split(".")) for d in children]
        own = [r for r in left if r.is_relative_to(Path(*package.split(".")))
               and not any(r.is_relative_to(b) or r == b.with_suffix(".py") for b in bases)]
        groups.append((package.replace(".", "/"), [left.pop(r) for r in sorted(own, key=_order)]))
        singles: list[str] = []
        for layer in [*inner, None]:
            names = [f"{package}.{n}" for n in layer.names] if layer else []
            if layer and all(_is_single_module(root, d) for d in names):
                singles += names
                continue
            if singles:
                take(f"{package.replace('.', '/')}: " + ", ".join(d.rsplit(".", 1)[-1] for d in singles), singles)
                singles = []
            if len(names) == 1:
                walk(names[0])
            elif names:
                take(" | ".join(d.replace(".", "/") for d in names), names)

    for package in order:
        walk(package)
    if left:
        groups.append(("in no package of the contracts", [left[r] for r in sorted(left, key=_order)]))
    return [(title, found) for title, found in groups if found]


def render_modules(root: Path = ROOT) -> str:
    lines = []
    for title, found in _groups(root):
        lines += [f"**{title}**", ""]
        lines += [f"- `{p.relative_to(root).as_posix()}`: {first_sentence(p)}" for p in found]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _markers(part: str) -> tuple[str, str]:
    return (f"<!-- BEGIN GENERATED: {part} (python {SCRIPT}; do not edit by hand) -->",
            f"<!-- END GENERATED: {part} -->")


def render_page(page: str, root: Path = ROOT) -> str:
    """``page`` with each generated part replaced by what the code says now."""
    renders = {"layers": render_layers, "modules": render_modules}
    for part in PARTS:
        begin, end = _markers(part)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), flags=re.S)
        if len(pattern.findall(page)) != 1:
            raise SystemExit(f"{PAGE.relative_to(ROOT)}: expected one pair of markers\n{begin}\n{end}")
        generated = f"{begin}\n\n{renders[part](root)}\n{end}"
        page = pattern.sub(lambda _, text=generated: text, page)  # type: ignore[misc]
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 (with a diff) when the page is out of date")
    parser.add_argument("--layers", action="store_true", help="print the layer stack")
    args = parser.parse_args(argv)
    if args.layers:
        sys.stdout.write(render_layers())
        return 0
    old = PAGE.read_text()
    new = render_page(old)
    if args.check:
        if old == new:
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                   "docs/architecture.md", "generated"))
        print(f"\ndocs/architecture.md is out of date: run python {SCRIPT}", file=sys.stderr)
        return 1
    if old != new:
        PAGE.write_text(new)
        print("docs/architecture.md: rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
