"""`topology-studio studio`: start the Streamlit studio on 127.0.0.1 and wait for Ctrl-C.

The Streamlit child never outlives the command: it runs in its own process group (a terminal's
Ctrl-C reaches the command, which stops the child: SIGINT, then SIGKILL after 10 s), the command
forwards SIGTERM and SIGHUP to it, and on Linux the child is also sent SIGTERM by the kernel if
the command dies without a word (SIGKILL). It starts with Python's default signal handling
whatever the command inherited (`nohup`, `&` in a script ignore SIGINT).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from studio.cli._common import DB_ENV, CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output

__all__ = [
    "APP_PATH",
    "DEFAULT_PORT",
    "SERVER_PATH",
    "child_signals",
    "cmd_studio",
    "free_port",
    "launch_studio",
    "studio_command",
]

APP_PATH = Path(__file__).resolve().parents[1] / "app.py"
"""The studio's Streamlit entry script."""

SERVER_PATH = Path(__file__).resolve().parents[1] / "server.py"
"""What `streamlit run` serves: `APP_PATH` as an `st.App` with the studio's middleware (no 404s
for base paths the browser would otherwise probe; see `studio/server.py`)."""

DEFAULT_PORT = 8501
"""The port the studio prefers (Streamlit's default), when it is free."""

HOST = "127.0.0.1"
"""The studio only listens on the loopback address."""


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(preferred: int | None = DEFAULT_PORT) -> int:
    """`preferred` if it is free on 127.0.0.1, else a port the OS picks."""
    if preferred is not None and _port_is_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
    return port


def studio_command(port: int) -> list[str]:
    """The command that serves the studio: `streamlit run studio/server.py` on 127.0.0.1,
    headless."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(SERVER_PATH),
        "--server.address",
        HOST,
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        # the rest of .streamlit/config.toml, which Streamlit only reads from the current
        # directory: the studio behaves the same wherever it is started from
        "--server.fileWatcherType",
        "none",
        "--client.showErrorDetails",
        "none",
        "--client.toolbarMode",
        "minimal",
        "--runner.magicEnabled",
        "false",
    ]


def launch_studio(db_path: Path, out: Output, *, port: int | None = None) -> int:
    """Serve the studio over `db_path` until Ctrl-C (or until Streamlit exits).

    The database path reaches the app through `$TOPOLOGY_STUDIO_DB` (absolute).

    Returns:
        0 after Ctrl-C; Streamlit's exit code if it stopped by itself.

    Raises:
        CliUsageError: the studio app is missing, or the given port is taken.
    """
    if not APP_PATH.is_file():
        raise CliUsageError(f"the studio app is not installed ({APP_PATH} is missing)")
    if port is not None and not _port_is_free(port):
        raise CliUsageError(f"port {port} on {HOST} is in use: pick another with --port")
    chosen = port if port is not None else free_port()
    env = dict(os.environ)
    env[DB_ENV] = str(db_path.resolve())
    out.line(f"Studio: http://{HOST}:{chosen}  (database {db_path}; Ctrl-C stops it)")
    proc = subprocess.Popen(  # noqa: S603 (fixed argv)
        studio_command(chosen), env=env, process_group=0, preexec_fn=child_signals
    )
    previous = _forward_sigterm(proc)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.note("studio stopped")
        return ExitCode.OK
    finally:
        if previous is not None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
"""Signals that stop the command and its child alike (the child is in its own group)."""

_PR_SET_PDEATHSIG = 1
"""Linux `prctl` option: the signal a process gets when its parent dies."""


def child_signals() -> None:
    """In the child before `exec`: Python's default dispositions (an inherited SIG_IGN of
    SIGINT would survive `exec`), and on Linux SIGTERM when the command dies."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _forward_sigterm(proc: subprocess.Popen[bytes]) -> dict[int, Any] | None:
    """On SIGTERM or SIGHUP, stop the studio too (so it is never orphaned); returns the old
    handlers by signal.

    Only possible on the main thread; elsewhere nothing is installed (returns None).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        raise KeyboardInterrupt

    old: dict[int, Any] = {}
    for signum in _FORWARDED:
        previous = signal.getsignal(signum)
        old[signum] = previous if previous is not None else signal.SIG_DFL
        signal.signal(signum, handler)
    return old


def cmd_studio(args: argparse.Namespace, out: Output) -> int:
    """`studio [--port N] [--db PATH]`."""
    return launch_studio(resolve_db_path(args.db), out, port=args.port)
