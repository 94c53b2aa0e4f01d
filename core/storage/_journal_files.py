"""Which journal files a store may read: inside its journals folder, regular, never blocking.

A run's `journal` column and the names listed in the journals folder are stored data. Followed
blindly, a column edited to `'../../secret.txt'` made an ingest read that file (its first line
landed in `ingest_errors.line_head`), and a FIFO in its place made `topology-studio runs` hang.
So a journal is read only when it resolves to a file directly inside the store's journals
folder (symlinks followed, then checked) that is a regular file, and it is opened with
`O_NONBLOCK` and checked with `fstat` before a byte is read (a FIFO swapped in between is still
refused). Anything else is refused: the store records why (`ingest_errors`) and lists the run as
`damaged`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from core.errors import StoreError

__all__ = ["JournalRefusedError", "journal_refusal", "open_journal"]


class JournalRefusedError(StoreError):
    """A journal path the store will not read (outside its folder, or not a regular file)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def journal_refusal(journal_dir: Path, journal: str | os.PathLike[str]) -> str | None:
    """Why the store must not read this journal, or None when it may.

    Args:
        journal_dir: the store's journals folder.
        journal: a `runs.journal` value (a file name in `journal_dir`), or a path in it.

    Returns:
        None for a file directly inside `journal_dir` (after following symlinks) that is a
        regular file or does not exist (a deleted journal is no danger: the store keeps the
        rows). Otherwise one line, e.g. `"journal '../../x.txt' resolves outside the journals
        folder /data/runs.duckdb.journals"` or `"journal 'r1.jsonl' is a FIFO, not a regular
        file"`. It never opens the file (one `lstat`, plus resolving a symlink).
    """
    text = os.fspath(journal)
    if "\0" in text:
        return f"journal {text!r} is not a file name (it holds a NUL byte)"
    folder = journal_dir.resolve()
    given = Path(text)
    candidate = given if given.is_absolute() else journal_dir / given
    if given.is_absolute() or given.name != text or text in ("", ".", ".."):
        resolved = candidate.resolve()  # a path, not a bare name: where does it lead?
    else:
        resolved = folder / text
        try:
            if stat.S_ISLNK(os.lstat(resolved).st_mode):
                resolved = resolved.resolve()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"journal {text!r} cannot be examined: {exc.strerror or exc}"
    if resolved.parent != folder:
        return f"journal {text!r} resolves outside the journals folder {journal_dir}"
    try:
        mode = os.stat(resolved).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"journal {text!r} cannot be examined: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"journal {text!r} is {_kind(mode)}, not a regular file"
    return None


def open_journal(path: Path) -> BinaryIO:
    """Open a journal for reading without ever blocking, and only if it is a regular file.

    Opened with `O_NONBLOCK` (a FIFO would otherwise block the open until a writer appears),
    then checked with `fstat` on the open descriptor, so a file swapped for a FIFO after
    `journal_refusal` looked at it is still refused. Reads of a regular file ignore the flag.

    Raises:
        FileNotFoundError: there is no such file.
        JournalRefusedError: it is not a regular file (names the file and what it is).
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise JournalRefusedError(f"journal {path.name!r} is {_kind(mode)}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
