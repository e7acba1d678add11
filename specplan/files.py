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
    0666 & ~umask."""
    _check_name(path)
    target = Path(path)
    tmp = target.parent / f".{target.name[:64]}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise output_error(path, exc, what) from None
    except BaseException:
        _remove(tmp)
        raise
    return target


@contextmanager
def staged_dir(out_dir: str | Path, *, what: str = "the output folder") -> Iterator[Path]:
    """A hidden sibling folder to write into; on success its files move into `out_dir`
    (created with the umask), on any failure it is removed and `out_dir` is untouched."""
    _check_name(out_dir)
    out = Path(out_dir)
    stage = out.parent / f".{out.name[:64]}.{uuid.uuid4().hex[:12]}.staging"
    try:
        if out.exists() and not out.is_dir():
            raise FileExistsError(errno.EEXIST, "File exists", str(out))
        out.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir()
    except OSError as exc:
        raise output_error(out, exc, what) from None
    try:
        yield stage
        _publish(stage, out, what)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _publish(stage: Path, out: Path, what: str) -> None:
    try:
        out.mkdir(exist_ok=True)
        for item in sorted(stage.iterdir()):
            os.replace(item, out / item.name)
    except OSError as exc:
        raise output_error(out, exc, what) from None


def read_text(path: str | Path, what: str) -> str:
    """A user's input file as UTF-8 text; a missing, unreadable or binary file is a user error."""
    _check_name(path)

    def fail(message: str) -> UserError:
        return UserError([Diagnostic(str(path), None, None, "", message)])

    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise fail(f"no such file; expected {what}") from None
    except IsADirectoryError:
        raise fail(f"is a folder; expected {what}") from None
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror}") from None
    if b"\x00" in raw:
        raise fail(f"is a binary file; expected {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"is not UTF-8 text; expected {what}") from None


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
