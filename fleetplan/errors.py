"""What the command line needs before any heavy import: the one-line error type and the names
of the problem kinds. A leaf module (standard library only), so ``fleetplan --help`` and the
error paths of every command load neither numpy nor pydantic.

:class:`InstanceError` is re-exported by :mod:`fleetplan.instances` (its documented home).
"""

from __future__ import annotations

from collections.abc import Sequence

# The kinds :data:`fleetplan.instances.KINDS` registers (a test keeps the two equal): the
# command line names them in its help without loading any kind.
KIND_NAMES = ("allocation", "binpack", "placement", "reservation")


class InstanceError(Exception):
    """An instance, plan or parameter set is invalid.

    ``path`` is the JSON path of the offending value (``jobs[3].scale_factor``), ``reason``
    says what is wrong with it. ``str(error)`` is one line, fit for a command-line message.
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


class OutputError(InstanceError):
    """An output cannot be written: a path that names a directory, a device fleetplan will not
    write over, an input of the same command, a missing folder, or a write that failed (a full
    disk, ``ulimit -f``). ``path`` is the option or the file; nothing was written."""
