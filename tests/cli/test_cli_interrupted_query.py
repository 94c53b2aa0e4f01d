"""A Ctrl-C that reaches a DuckDB query is an interrupt, not an internal error: DuckDB reports
it as `duckdb.InterruptException` or a bare `RuntimeError('Query interrupted')`; the command
line exits 130 with `interrupted` (a second Ctrl-C during the end-of-search ingest, seen as
"internal error: RuntimeError: Query interrupted" under load)."""

from __future__ import annotations

import argparse
import threading
import time

import duckdb
import pytest

import studio.cli
from core.errors import is_query_interrupt
from studio.cli import main
from studio.cli._output import Output


def _interrupted_query() -> BaseException:
    """The exception a real DuckDB query raises when it is interrupted while it runs."""
    con = duckdb.connect()
    caught: list[BaseException] = []

    def run() -> None:
        try:
            con.execute("SELECT count(*) FROM range(10000000000) a")
        except BaseException as exc:  # noqa: BLE001 (the test inspects it)
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.3)
    con.interrupt()
    worker.join(30)
    con.close()
    assert len(caught) == 1
    return caught[0]


def test_duckdb_interrupts_are_told_from_failures() -> None:
    assert is_query_interrupt(_interrupted_query())
    assert is_query_interrupt(RuntimeError("Query interrupted"))
    assert not is_query_interrupt(RuntimeError("Event loop is closed"))
    assert not is_query_interrupt(duckdb.IOException("IO Error: disk full"))
    # a transaction the interrupt ended: DuckDB reports it as its own error, naming the cause
    assert is_query_interrupt(
        duckdb.TransactionException(
            "TransactionContext Error: Failed to commit: INTERRUPT Error: Interrupted!"
        )
    )
    assert not is_query_interrupt(duckdb.TransactionException("TransactionContext Error: conflict"))
    assert not is_query_interrupt(KeyError("Query interrupted"))


@pytest.mark.parametrize(
    ("raised", "code", "line"),
    [
        (RuntimeError("Query interrupted"), 130, "topology-studio: error: interrupted"),
        (
            RuntimeError("something else"),
            1,
            "topology-studio: error: internal error: RuntimeError: something else (run the "
            "command again with --debug for the traceback)",
        ),
    ],
)
def test_a_query_interrupt_exits_130_and_other_runtime_errors_stay_internal(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raised: BaseException,
    code: int,
    line: str,
) -> None:
    def command(args: argparse.Namespace, out: Output) -> int:
        raise raised

    monkeypatch.setattr(studio.cli, "_handler", lambda name, json_output=False: command)
    assert main(["runs"]) == code
    assert capsys.readouterr().err.splitlines() == [line]
