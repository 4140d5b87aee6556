"""The error a workflow raises for an argument its caller can correct.

It is a ``tuner.errors.SwtuneError`` (the command line prints it as one line and exits with 2) and a
``ValueError`` (what a Python caller expects of a bad argument).
"""

from __future__ import annotations

from tuner.errors import SwtuneError


class ArgumentError(SwtuneError, ValueError):
    """A workflow's argument, or a combination of them, that cannot be run as given; the message says why."""
