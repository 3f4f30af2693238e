"""Writing outputs without destroying anything: every file and folder fleetplan writes goes
through here.

The rules, the same for every writer (``solve``, ``generate``, ``import``, ``export``,
``simulate``, ``bench``, ``size``, ``whatif``, ``compare``, ``plot`` and the Python API):

* a **regular file** (or a new name) is written to a temporary file beside it and renamed onto
  it, so a crash, a signal or a full disk never leaves half a file;
* a **character device or FIFO** (``/dev/null``, ``/dev/stdout``, a named pipe with a reader) is
  written *in place*: a rename would replace the device node itself for the whole machine;
* a **symlink** is followed deliberately: the file it points to is written (by the two rules
  above) and the link stays; a dangling link is refused;
* ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` are written through the descriptor itself,
  after what the command printed so far, whatever the shell redirected it to;
* a **directory, block device or socket** is refused: nothing is renamed over it or written
  into it;
* a **folder output** is built in a temporary sibling and renamed into place at the end, so it
  is whole or absent; it must be new or empty, and not a symlink (the rename cannot put a folder
  where a link is);
* **one file, one role**: no output may be an input of the same command, no two outputs may
  name one file, and no output may lie inside a folder output, however the paths are spelled
  (``a.json`` and ``./a.json``, a symlink and its target, two hard links): files that exist are
  compared by device and inode, new names by their resolved path.

Every refusal and every failed write (a full disk, ``ulimit -f``, a read-only folder) raises
:class:`~fleetplan.errors.OutputError`, one line naming the path: the command line reports it
with exit code 2, never as an internal error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from fleetplan.errors import OutputError

__all__ = [
    "atomic_write", "atomic_write_text", "building_folder", "check_output_file",
    "check_output_folder", "check_not_an_input", "check_distinct_outputs", "check_figure_path",
    "failed_write", "save_figure", "same_file",
]

# File types by what fleetplan does with them.
_IN_PLACE = {stat.S_IFCHR: "a character device", stat.S_IFIFO: "a FIFO"}
_REFUSED = {stat.S_IFDIR: "a directory", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def _file_type(mode: int) -> int:
    return stat.S_IFMT(mode)


def _describe(mode: int) -> str:
    kind = _file_type(mode)
    return _IN_PLACE.get(kind) or _REFUSED.get(kind) or "not a regular file"


def _target(path: str | os.PathLike[str], flag: str) -> tuple[Path, os.stat_result | None]:
    """Where a write to ``path`` lands and what is there now (None: nothing yet).

    A symlink is followed to its final target; a dangling one is refused, because creating the
    file it names somewhere else is rarely what the person who made the link meant."""
    given = Path(path)
    try:
        os.lstat(given)
    except FileNotFoundError:
        return given, None
    except OSError as error:
        raise OutputError(flag, f"{path}: cannot be written ({error.strerror})") from None
    try:
        status = os.stat(given)
    except FileNotFoundError:
        raise OutputError(flag, f"{path}: is a symlink to a missing file; write to the target "
                                "itself or remove the link") from None
    except OSError as error:
        raise OutputError(flag, f"{path}: cannot be written ({error.strerror})") from None
    if given.is_symlink() and stat.S_ISREG(status.st_mode) and _descriptor(given) is None:
        return Path(os.path.realpath(given)), status
    return given, status


_DESCRIPTOR_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: Path) -> int | None:
    """The descriptor ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names, or None.

    Writing there goes through that descriptor: renaming a file onto the shell's redirection
    target would leave the descriptor on the unlinked old file (and the rest of the command's
    output with it), and reopening it would start again at offset 0."""
    text = os.path.normpath(str(path))
    if text in _DESCRIPTOR_NAMES:
        return _DESCRIPTOR_NAMES[text]
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if text.startswith(prefix) and text[len(prefix):].isdigit():
            return int(text[len(prefix):])
    return None


def check_output_file(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None] = (),
                      flag: str = "-o") -> None:
    """Refuse, before any work, an output file that could not be written safely or that is one
    of the command's ``inputs``."""
    target, status = _target(path, flag)
    if status is not None and _descriptor(Path(path)) is not None:
        return
    if status is not None and not stat.S_ISREG(status.st_mode):
        if _file_type(status.st_mode) not in _IN_PLACE:
            raise OutputError(flag, f"{path}: is {_describe(status.st_mode)}; give a file name")
        return  # written in place: the folder it sits in need not be writable
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise OutputError(flag, f"{path}: directory '{parent}' does not exist")
    if not parent.is_dir():
        raise OutputError(flag, f"{path}: '{parent}' is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(flag, f"{path}: directory '{parent}' is not writable")
    _probe(parent, path, flag)
    check_not_an_input(path, inputs, flag)


def _probe(parent: Path, path: str | os.PathLike[str], flag: str) -> None:
    """Create and remove a file in ``parent``: ``os.access`` says yes to root everywhere, and
    ``/proc`` or a read-only mount refuse only the real thing (``simulate
    --out /proc/x`` failed after the whole simulation)."""
    try:
        handle, name = tempfile.mkstemp(prefix=".fleetplan-probe-", dir=parent)
    except OSError as error:
        raise OutputError(flag, f"{path}: cannot create a file in '{parent}' ({error.strerror})") from None
    os.close(handle)
    _unlink_quietly(name)


def _identity(path: str | os.PathLike[str]) -> tuple | None:
    """What a write to ``path`` lands on, to tell whether two paths name one file: the device and
    inode of an existing file (through any symlink; hard links alike), else the resolved path
    of the new name. None for a character device: it is written in place and replaces nothing,
    so several outputs may share one (``/dev/null``)."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        try:
            return ("path", os.path.realpath(path))
        except (OSError, ValueError):
            return ("path", os.path.abspath(path))
    if stat.S_ISCHR(status.st_mode):
        return None
    return ("inode", status.st_dev, status.st_ino)


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether a write to ``first`` and one to ``second`` land on the same file (see
    :func:`_identity`; never for a character device).

    >>> same_file("out/plan.json", "out/../out/./plan.json")
    True
    """
    identity = _identity(first)
    return identity is not None and identity == _identity(second)


def check_not_an_input(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None],
                       flag: str = "-o") -> None:
    """Refuse an output that is (the same file as) one of ``inputs``."""
    for source in inputs:
        if source is not None and same_file(path, source):
            same = "" if os.path.abspath(source) == os.path.abspath(path) else f" ({source})"
            raise OutputError(flag, f"{path}: is also an input of this command{same}; write the "
                                    "output elsewhere")


def check_distinct_outputs(files: Iterable[tuple[str, str | os.PathLike[str] | None]],
                           folders: Iterable[tuple[str, str | os.PathLike[str] | None]] = ()) -> None:
    """Refuse two outputs of one command that name one file, or an output inside a folder
    output (the folder is built aside and renamed into place at the end: a file written into it
    first would make that rename fail, after all the work). ``files`` and ``folders`` are
    ``(flag, path)`` pairs; a None path is an output not asked for."""
    files = [(flag, path) for flag, path in files if path is not None]
    folders = [(flag, path) for flag, path in folders if path is not None]
    named = [*files, *folders]
    for index, (first_flag, first) in enumerate(named):
        for flag, path in named[index + 1:]:
            if same_file(first, path):
                raise OutputError(flag, f"{path}: names the same file as {first_flag} {first}; give each "
                                        "output a file of its own")
    for folder_flag, folder in folders:
        root = os.path.realpath(folder)
        for flag, path in named:
            if path is not folder and os.path.realpath(path).startswith(root + os.sep):
                raise OutputError(flag, f"{path}: is inside the {folder_flag} folder {folder}, which is "
                                        "built whole at the end; write it elsewhere")


def check_output_folder(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None] = (),
                        flag: str = "--out", existing: Iterable[str] | None = None) -> None:
    """Refuse, before any work, a folder output that could not be made whole.

    By default the folder must be new or empty (it is built aside and renamed into place).
    ``existing``, the names a command rewrites inside a folder it keeps (``bench --resume``),
    allows a non-empty folder and refuses only an input among those names."""
    target = Path(path)
    if not str(path).strip() or target.name in ("", ".", ".."):
        raise OutputError(flag, f"{path}: give a new directory's name")
    inputs = [source for source in inputs if source is not None]
    check_not_an_input(path, inputs, flag)
    if target.is_symlink() and not target.exists():
        raise OutputError(flag, f"{path}: is a symlink to a missing folder")
    if target.is_symlink() and existing is None:
        raise OutputError(flag, f"{path}: is a symlink; give the folder itself (a new folder is built "
                                "aside and renamed into place, which cannot replace a link)")
    if target.exists() and not target.is_dir():
        raise OutputError(flag, f"{path}: exists and is not a directory")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(flag, f"{path}: directory '{parent}' does not exist")
    if target.is_dir():
        if existing is not None:
            if not os.access(target, os.W_OK | os.X_OK):
                raise OutputError(flag, f"{path}: directory is not writable")
            for name in existing:
                check_not_an_input(target / name, inputs, flag)
            return
        if any(target.iterdir()):
            raise OutputError(flag, f"{path}: directory exists and is not empty; choose a new one")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(flag, f"{path}: directory '{parent}' is not writable")
    _probe(parent, path, flag)


def failed_write(target: str | os.PathLike[str], error: OSError, kept: str = "nothing was written") -> OutputError:
    """The one-line error of a write to ``target`` that failed (``error``: a full disk, ``ulimit
    -f``, ...), naming the file and saying what is ``kept``."""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "no space left on the device"
    elif error.errno == errno.EFBIG:
        reason = "file too large for this process's limit (ulimit -f)"
    return OutputError(str(target), f"cannot write: {reason}; {kept}")


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], None], suffix: str = ".tmp") -> Path:
    """Have ``write(temporary_path)`` write the file, then put it at ``path`` by the rules of
    this module: renamed onto a regular file or a new name (the temporary is removed on any
    error), copied into a character device or FIFO in place, refused for anything else.
    ``suffix`` is the temporary's ending, for writers that choose a format by it. Returns the
    path written (a symlink's target)."""
    target, status = _target(path, "")
    if status is not None and _descriptor(Path(path)) is not None:
        _write_in_place(Path(path), write, suffix, status)
        return Path(path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        if _file_type(status.st_mode) not in _IN_PLACE:
            raise OutputError(str(path), f"is {_describe(status.st_mode)}: fleetplan writes only "
                                         "regular files, character devices and FIFOs")
        _write_in_place(Path(path), write, suffix, status)
        return Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=directory)
    except OSError as error:
        raise failed_write(target, error) from None
    os.close(handle)
    try:
        write(temporary)
        os.chmod(temporary, _mode_for(status))
        os.replace(temporary, target)
    except OSError as error:
        _unlink_quietly(temporary)
        raise failed_write(target, error) from None
    except BaseException:
        _unlink_quietly(temporary)
        raise
    return target


def _mode_for(status: os.stat_result | None) -> int:
    """The permissions of the file replaced, or those a plain ``open()`` would give a new one
    (``mkstemp`` makes the temporary 0600)."""
    if status is not None:
        return stat.S_IMODE(status.st_mode)
    return 0o666 & ~_umask()


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _write_in_place(target: Path, write: Callable[[str], None], suffix: str, status: os.stat_result) -> None:
    """Write a device or FIFO in place: the whole output is made in a private temporary file
    first, so a failure before the copy writes nothing into the device."""
    with tempfile.TemporaryDirectory(prefix="fleetplan-out-") as scratch:
        temporary = os.path.join(scratch, f"out{suffix}")
        try:
            write(temporary)
            named = _descriptor(target)
            if named is not None:
                sys.stdout.flush()  # what the command printed so far comes first
                descriptor = os.dup(named)
            elif stat.S_ISFIFO(status.st_mode):
                descriptor = _open_fifo(target)
            else:
                descriptor = os.open(target, os.O_WRONLY)
            with open(temporary, "rb") as source, open(descriptor, "wb") as sink:
                shutil.copyfileobj(source, sink)
        except OSError as error:
            raise failed_write(target, error) from None


def _open_fifo(fifo: Path) -> int:
    """A FIFO opened for writing, refused when nobody reads it (a blocking open would wait for a
    reader for ever). The descriptor is the one written: closing a probe would end the reader's
    stream before the output reached it."""
    try:
        descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OutputError(str(fifo), "is a FIFO with no reader; start the reader first") from None
        raise
    os.set_blocking(descriptor, True)
    return descriptor


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` by :func:`atomic_write`'s rules."""

    def write(temporary: str) -> None:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)

    return atomic_write(path, write)


@contextlib.contextmanager
def building_folder(path: str | os.PathLike[str], flag: str = "--out") -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to fill; on success rename it to ``path`` (replacing
    an empty directory of that name), on any failure remove it: never a partial ``path``."""
    target = Path(path)
    try:
        temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as error:
        raise OutputError(flag, f"{path}: could not create it ({error.strerror})") from None
    try:
        os.chmod(temporary, 0o777 & ~_umask())
        yield temporary
        try:
            os.rename(temporary, target)
        except OSError as error:
            raise OutputError(flag, f"{path}: could not create it ({error.strerror})") from None
    except OSError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise failed_write(target, error) from None
    except OutputError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        # A file of the folder failed: name it where it was to be, not in the temporary folder.
        raise OutputError(error.path.replace(str(temporary), str(target)), error.reason.replace(str(temporary), str(target)),
                          error.source, error.more) from None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


# What matplotlib writes for fleetplan's pictures (chosen by the file's suffix).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_figure_path(path: str | os.PathLike[str], flag: str = "--plot") -> str:
    """The picture format ``path``'s suffix names (``png``, ``svg`` or ``pdf``); anything else
    is refused before any work."""
    suffix = Path(path).suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise OutputError(flag, f"{path}: unknown image type '{suffix or '(none)'}' (known: "
                                f"{', '.join(FIGURE_SUFFIXES)})")
    return suffix[1:]


def save_figure(figure: object, path: str | os.PathLike[str], dpi: int = 120) -> Path:
    """Save a matplotlib figure by :func:`atomic_write`'s rules, in the format its suffix names."""
    image_format = check_figure_path(path, "")
    return atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=dpi, format=image_format),
                        f".{image_format}")
