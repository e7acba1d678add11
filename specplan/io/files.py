"""Every file specplan writes for a user: atomic, created with the user's umask, and an output
path that cannot be written is a user error naming it (exit 2), never a traceback.

`write_atomic` writes beside the target and renames, so a reader never sees half a file;
`staged_dir` gathers a command's files (compile: plan.json and the runtime module) in a hidden
sibling folder and moves them into place only when every one was written, so a failure leaves
the output folder as it was.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specplan.errors import Diagnostic, UserError

_WHY = {errno.ENOTDIR: "a parent of it is a file, not a folder",
        errno.EEXIST: "a file of that name is in the way",
        errno.EACCES: "permission denied", errno.EPERM: "permission denied",
        errno.EROFS: "the file system is read-only", errno.ENOSPC: "no space left on the device",
        errno.ENAMETOOLONG: "the name is too long for the file system",
        errno.EISDIR: "it is a folder", errno.EINVAL: "the name is not valid here"}


class OutputError(UserError):
    """An output path that cannot be written."""


def output_error(path: str | Path, exc: OSError, what: str = "the output") -> OutputError:
    blocker = next((a for a in Path(path).parents if a.exists() and not a.is_dir()), None)
    why = (f"{blocker} is a file, not a folder" if blocker is not None
           else _WHY.get(exc.errno or 0, exc.strerror or str(exc)))
    return OutputError([Diagnostic(str(path), None, None, "", f"cannot write {what} here: {why}")])


def _check_name(path: str | Path) -> None:
    if "\x00" in str(path):
        raise OutputError([Diagnostic(repr(str(path)), None, None, "",
                                      "the path holds a NUL character; expected a file path")])


def write_atomic(path: str | Path, text: str | bytes, *, what: str = "the output") -> Path:
    """Write `text` (or bytes) to `path` through a temporary sibling and a rename; mode
    0666 & ~umask, or the mode of the file it replaces. SIGTERM removes the temporary file."""
    _check_name(path)
    target = Path(path)
    tmp = target.parent / f".{target.name[:64]}.{uuid.uuid4().hex[:12]}.tmp"
    with terminate_as_exit():
        return _write(target, tmp, text, path, what)


def _write(target: Path, tmp: Path, text: str | bytes, path, what: str) -> Path:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
        mode = _kept_mode(target)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        with os.fdopen(fd, "wb") as fh:
            fh.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            if mode is not None:  # replacing a file keeps its permissions (0640 stays 0640)
                os.fchmod(fh.fileno(), mode)
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise output_error(path, exc, what) from None
    except BaseException:
        _remove(tmp)
        raise
    return target


@contextmanager
def staged_dir(out_dir: str | Path, *, what: str = "the output folder",
               replaces: str | None = None) -> Iterator[Path]:
    """A hidden sibling folder to write into; on success its files move into `out_dir`
    (created with the umask), on any failure (SIGTERM included) it is removed and `out_dir`
    is untouched. `replaces`: a glob of the files the command owns in `out_dir` (compile:
    runtime_*.py); those the stage does not hold are another plan's, removed on success."""
    _check_name(out_dir)
    out = Path(out_dir)
    stage = out.parent / f".{out.name[:64]}.{uuid.uuid4().hex[:12]}.staging"
    with terminate_as_exit():
        try:
            if out.exists() and not out.is_dir():
                raise FileExistsError(errno.EEXIST, "File exists", str(out))
            out.parent.mkdir(parents=True, exist_ok=True)
            stage.mkdir()
        except OSError as exc:
            raise output_error(out, exc, what) from None
        try:
            yield stage
            _publish(stage, out, what, replaces)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) while a command writes, so its `finally` blocks remove
    what it staged (the default action ends the process on the spot)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _publish(stage: Path, out: Path, what: str, replaces: str | None) -> None:
    try:
        _fits(stage, out)  # a file where a folder goes (or the reverse) fails before any move
        _move_into(stage, out, replaces)
    except OSError as exc:
        raise output_error(out, exc, what) from None


def _fits(stage: Path, out: Path) -> None:
    """Raise the OSError a move of the stage into `out` would meet part way."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(out))
    for item in stage.iterdir():
        there = out / item.name
        if item.is_dir() and there.exists():
            _fits(item, there)
        elif there.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(there))


def _move_into(stage: Path, out: Path, replaces: str | None) -> None:
    """Move the stage's files into `out`; a staged folder `out` already has is merged (a
    deployment's prefill/ and decode/), `replaces` applying in each folder written into."""
    out.mkdir(exist_ok=True)
    moved = sorted(stage.iterdir())
    for item in moved:
        if item.is_dir() and (out / item.name).is_dir():
            _move_into(item, out / item.name, replaces)
        else:
            os.replace(item, out / item.name)
    if replaces:
        remove_stale(out, replaces, keep={item.name for item in moved})


def remove_stale(folder: str | Path, pattern: str, keep: set[str]) -> None:
    """Remove the files of `folder` matching `pattern` that are not in `keep`: what an earlier
    run wrote there and this one replaces (another plan's runtime module)."""
    for item in Path(folder).glob(pattern):
        if item.name not in keep and item.is_file():
            item.unlink()


MAX_INPUT_BYTES = 1 << 20  # a spec, a deployment, an engine config, a script: 1 MiB (README)


def not_readable(path: str | Path, limit: int = MAX_INPUT_BYTES) -> str | None:
    """Why `path` cannot be read as an input file, or None when it can: missing, a folder, a
    path the file system cannot name (a component over 255 bytes), not a regular file
    (/dev/zero, a FIFO: both read without end), or larger than `limit` bytes."""
    if "\x00" in str(path):
        return "the path holds a NUL character"
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read: {_why_not(exc)}"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a device, a FIFO or a socket)"
    if info.st_size > limit:
        return f"holds {info.st_size:,} bytes, beyond specplan's limit of {limit:,} bytes"
    return None


def read_bounded(path: str | Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file `not_readable` passed; OSError when it cannot be read, ValueError
    when it grew past `limit` since."""
    with open(path, "rb") as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise ValueError(f"holds more than {limit:,} bytes, beyond specplan's limit")
    return raw


def read_input(path: str | Path, what: str, *, limit: int = MAX_INPUT_BYTES,
               error: type[UserError] = UserError) -> bytes:
    """The bytes of a user's input file, refused as `error` (exit 2) when `not_readable`."""
    def fail(message: str) -> UserError:
        return error([Diagnostic(str(path) if "\x00" not in str(path) else repr(str(path)),
                                 None, None, "", message)])

    why = not_readable(path, limit)
    if why == "is a directory":
        raise fail(f"is a folder; expected {what}")
    if why is not None:
        raise fail(f"{why}; expected {what}")
    try:
        return read_bounded(path, limit)
    except OSError as exc:
        raise fail(f"cannot read: {_why_not(exc)}") from None
    except ValueError as exc:
        raise fail(str(exc)) from None


def _why_not(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "a component of the path is longer than the file system allows (255 bytes)"
    return _WHY.get(exc.errno or 0, exc.strerror or str(exc))


def read_text(path: str | Path, what: str, *, limit: int = MAX_INPUT_BYTES,
              error: type[UserError] = UserError) -> str:
    """A user's input file as UTF-8 text; a missing, unreadable, oversized or binary file is a
    user error."""
    raw = read_input(path, what, limit=limit, error=error)

    def fail(message: str) -> UserError:
        return error([Diagnostic(str(path), None, None, "", message)])

    if b"\x00" in raw:
        raise fail(f"is a binary file; expected {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error([Diagnostic(str(path), line, 1, "", f"is not UTF-8 text; expected {what}")]) from None


def _kept_mode(target: Path) -> int | None:
    try:
        info = os.stat(target)
    except OSError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
