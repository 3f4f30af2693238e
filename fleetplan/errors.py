"""What the command line needs before any heavy import: the one-line error type and the names
of the problem kinds. A leaf module (standard library only), so ``fleetplan --help`` and the
error paths of every command load neither numpy nor pydantic.

:class:`InstanceError` is re-exported by :mod:`fleetplan.instances` (its documented home).
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

# The kinds :data:`fleetplan.instances.KINDS` registers (a test keeps the two equal): the
# command line names them in its help without loading any kind.
KIND_NAMES = ("allocation", "binpack", "gpushare", "placement", "reservation")


# An error line quotes at most this many characters of a bad value (an alias bomb's value
# expanded to 254 MB and was echoed whole).
EXCERPT_CHARS = 60
_REPR = reprlib.Repr()  # Python 3.11's Repr takes no arguments
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 6, 6, 4
_REPR.maxstring = _REPR.maxother = EXCERPT_CHARS
_REPR.maxlong = 40


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short ``repr`` of ``value`` for an error line: nested and long values are cut (without
    building their full text) and the result is at most about ``limit`` characters."""
    text = _REPR.repr(value)
    if len(text) > limit:
        size = f" ({len(value):,} characters)" if isinstance(value, str) else ""
        text = text[: max(limit - 3, 1)] + "..." + size
    return text


def clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as is, or its first characters and how long it was (names, flags, tokens)."""
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text):,} characters)"


class InstanceError(ValueError):
    """An instance, plan, parameter set or option value is invalid.

    ``path`` is the JSON path of the offending value (``jobs[3].scale_factor``), ``reason``
    says what is wrong with it. ``str(error)`` is one line, fit for a command-line message.

    A :class:`ValueError`, as bad arguments are in scikit-learn and scipy: ``except ValueError``
    catches every input error of the toolkit (this class and :class:`OutputError`).
    """

    def __init__(self, path: str, reason: str, source: str | None = None,
                 more: Sequence[tuple[str, str]] = ()):
        self.path = path
        self.reason = reason
        self.source = source
        # Further (path, reason) pairs found in the same validation: every error at once.
        self.more = list(more)
        where = f"{source}: " if source else ""
        at = f"{path}: " if path else ""
        extra = f" (and {len(self.more)} more)" if self.more else ""
        super().__init__(f"{where}{at}{reason}{extra}")

    def lines(self) -> list[str]:
        """One line per error found, each naming the file and the JSON path."""
        where = f"{self.source}: " if self.source else ""
        return [f"{where}{path}: {reason}" if path else f"{where}{reason}"
                for path, reason in [(self.path, self.reason), *self.more]]


class InputTypeError(InstanceError, TypeError):
    """Something that is not an instance or a plan where one is expected (a file name, None, a
    list): a :class:`TypeError`, as Python's own argument errors are, and an
    :class:`InstanceError`, so code and commands that catch input errors catch it too."""


def wrong_input_type(value: object, what: str, accepted: str, load: str) -> InputTypeError:
    """The error for ``value`` given as ``what`` (``instance`` or ``plan``): names the type given,
    what is accepted, and for a path the function that reads it (``load``)."""
    import os

    given = "None" if value is None else type(value).__name__
    hint = ""
    if isinstance(value, (str, os.PathLike)):
        given = f"{given} {clip(os.fspath(value))!r}"
        hint = f"; to use a file, read it first: fleetplan.{load}({clip(os.fspath(value))!r})"
    return InputTypeError(what, f"expected {accepted}, got {given}{hint}")


class OutputError(InstanceError):
    """An output cannot be written: a path that names a directory, a device fleetplan will not
    write over, an input of the same command, a missing folder, or a write that failed (a full
    disk, ``ulimit -f``). ``path`` is the option or the file; nothing was written."""


def error_object(error: Exception, exit_code: int = 2) -> dict[str, object]:
    """The JSON error object of ``--json`` and of the service: the first line, every line, the
    exit code, and for an :class:`InstanceError` the path, the reason and the file."""
    lines = error.lines() if isinstance(error, InstanceError) else [str(error)]
    body: dict[str, object] = {"error": lines[0], "errors": lines, "exit_code": exit_code}
    if isinstance(error, InstanceError):
        body.update(path=error.path, reason=error.reason, file=error.source)
    return body


def raise_interruption(error: BaseException) -> None:
    """Raise the interruption behind ``error``, if there is one; otherwise return.

    A Ctrl-C or SIGTERM whose handler raises while an extension module initialises (highspy,
    numpy, a compiled kernel) reaches Python as ``ImportError: initialization failed``, caused by
    the handler's exception. Code that catches ImportError (an optional library) or every
    Exception (the command's last resort) calls this first, so the signal is neither taken for a
    missing library nor reported as an internal error. Any exception in the chain that is not an
    :class:`Exception` (``KeyboardInterrupt``, the command line's ``Terminated``) counts."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, Exception):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
