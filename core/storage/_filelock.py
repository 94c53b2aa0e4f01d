"""Advisory locks on journal files (POSIX `flock`), so one process writes a journal at a time.

A journal's writer holds an exclusive lock for as long as it is open. Anyone can probe it: a
probe that cannot take a shared lock means a live writer holds the file, so a run with no
`run_finished` event is still running; a probe that succeeds means the writer is gone (crashed,
killed), so the run was interrupted. The lock dies with the process, even on SIGKILL.

On platforms without `fcntl` (Windows) nothing is locked and liveness is unknown (None).
"""

from __future__ import annotations

import os
import stat
import sys
import time
from typing import IO

__all__ = ["is_locked", "lock_exclusive", "unlock"]


def lock_exclusive(fh: IO[bytes], *, wait_s: float = 2.0) -> bool:
    """Take an exclusive lock on an open file, retrying for up to `wait_s` seconds.

    Returns:
        True when locked (or when the platform has no locks), False when another process
        (or another open file in this process) still holds it after `wait_s`.
    """
    if sys.platform == "win32":
        return True
    import fcntl

    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            # a liveness probe holds a shared lock for microseconds: retry a little
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def unlock(fh: IO[bytes]) -> None:
    """Release a lock taken with `lock_exclusive` (closing the file also releases it)."""
    if sys.platform == "win32":
        return
    import fcntl

    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def is_locked(path: str | os.PathLike[str]) -> bool | None:
    """Whether a writer holds the file's lock right now.

    The probe opens the file with `O_NONBLOCK`, so a FIFO in a journal's place never blocks
    it; anything but a regular file has no writer to find (False).

    Returns:
        True: a live writer holds it. False: nobody does (or the file is gone, or it is not a
        regular file). None: the platform cannot tell.
    """
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
