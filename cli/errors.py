"""The one place where a domain error becomes ``error: <one line>`` on stderr and exit code 2.

Commands raise; they do not catch to print. ``DomainErrorGroup`` is the root command class of the
app: it runs whichever (sub)command was asked for and turns the errors a user can act on into one
line -- swtune's own errors (``tuner.errors.SwtuneError``, which the db's and the AOT compiler's
errors extend), refused values (``ValueError``, ``OverflowError``), files (``OSError``), the
database (SQLAlchemy), and the service's answers and transport (``service.client.ServiceError``,
httpx). Anything else is a bug and keeps its traceback.

The SQLAlchemy and HTTP classes are looked up in ``sys.modules`` rather than imported: an error of
a library that was never loaded cannot be raised, and ``swtune worker`` runs where SQLAlchemy may
not be installed at all.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from tuner.errors import SwtuneError

EXIT_DOMAIN_ERROR = 2


class CommandError(SwtuneError):
    """A command's input the user can correct (a bad combination of options, an unreadable file)."""


def _one_line(text: str, fallback: str) -> str:
    return " ".join(text.split()) or fallback


def _loaded(module: str, name: str) -> type[BaseException] | None:
    """``module.name`` if that module is already imported, else None."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _http_message(exc: BaseException) -> str | None:
    service_error = _loaded("service.client", "ServiceError")
    if service_error is not None and isinstance(exc, service_error):
        status: int = getattr(exc, "status", 0)
        hint = " (is SWTUNE_TOKEN set to a valid token?)" if status == 401 else ""
        return _one_line(f"HTTP {status}: {getattr(exc, 'detail', exc)}", "HTTP error") + hint
    http_error = _loaded("httpx", "HTTPError")
    if http_error is not None and isinstance(exc, http_error):
        try:
            url = exc.request.url  # type: ignore[attr-defined]
            where = f"{url.scheme}://{url.netloc.decode()}"
        except RuntimeError:  # an httpx error raised without a request
            where = "the server"
        return f"cannot reach {where}: " + _one_line(str(exc), type(exc).__name__)
    return None


def _database_message(exc: BaseException) -> str | None:
    sqlalchemy_error = _loaded("sqlalchemy.exc", "SQLAlchemyError")
    if sqlalchemy_error is None or not isinstance(exc, sqlalchemy_error):
        return None
    orig = getattr(exc, "orig", None) or exc
    # the driver's first line names the problem; the rest is the SQL statement and a link
    first = (str(orig).strip().splitlines() or [""])[0]
    return f"database: {type(orig).__name__}: {first}"


def domain_message(exc: BaseException) -> str | None:
    """The one-line message of a domain error, or None when ``exc`` is not one (a bug: traceback)."""
    if isinstance(exc, (typer.Exit, typer.Abort, TyperException)):
        return None  # the command line's own flow: exit codes, usage errors
    for message in (_http_message(exc), _database_message(exc)):
        if message is not None:
            return message
    if isinstance(exc, (SwtuneError, ValueError, OverflowError, OSError)):
        return _one_line(str(exc), type(exc).__name__)
    return None


class DomainErrorGroup(TyperGroup):
    """The root command: sub-commands and sub-groups run inside it, so one handler serves them all."""

    def invoke(self, ctx: Any) -> Any:  # typer's click Context: vendored in typer._click, not public
        try:
            return super().invoke(ctx)
        except Exception as exc:
            message = domain_message(exc)
            if message is None:
                raise
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(EXIT_DOMAIN_ERROR) from None
