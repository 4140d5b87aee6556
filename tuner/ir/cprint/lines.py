"""Indented lines of C being printed, and the header of a C loop."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Ctx:
    """The lines of a scheduled kernel's slave function, at the current indentation ``depth``."""

    lines: list[str] = field(default_factory=list)
    depth: int = 1

    def emit(self, *lines: str) -> None:
        for ln in lines:
            self.lines.append("  " * self.depth + ln)


def for_line(ctype: str, var: str, lo: str | None, extent: str, inc: str) -> str:
    """The header of a loop of ``ctype`` ``var`` over [lo, lo + extent) (``lo`` None: from zero)."""
    if lo is not None:
        return f"for ({ctype} {var} = {lo}; {var} < {lo} + {extent}; {inc}) {{"
    return f"for ({ctype} {var} = 0; {var} < {extent}; {inc}) {{"
