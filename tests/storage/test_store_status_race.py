"""A run whose writer finishes between a query's ingest and its lock probe is never reported
`interrupted` (field case F10): the store reads a journal it finds unlocked once more before it
calls the run interrupted.

The interleaving is made deterministic with a store whose `ingest` runs a hook right after it
has read the journals: the hook is the writer appending its last event(s) and closing the
journal (which releases its lock), exactly what a search finishing at that moment does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import RunBuilder  # noqa: E402

from core.storage import DuckDBRunStore, IngestReport, RunJournal, journal_path  # noqa: E402


class HookedStore(DuckDBRunStore):
    """A store whose next full ingest runs `after_ingest` once, when it has read the journals
    and before the query goes on (where the lock probe comes); `reads` lists what each ingest
    read: `"all"` for a full one, else the journals read again."""

    after_ingest: Callable[[], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.reads: list[str] = []
        self._full = False
        super().__init__(*args, **kwargs)

    def ingest(self) -> IngestReport:
        self._full = True
        try:
            report = super().ingest()
        finally:
            self._full = False
        hook, self.after_ingest = self.after_ingest, None
        if hook is not None:
            hook()
        return report

    def _ingest_paths(self, paths: Iterable[Path]) -> IngestReport:
        paths = list(paths)
        self.reads.append("all" if self._full else ",".join(p.name for p in paths))
        return super()._ingest_paths(paths)


def _running(path: Path) -> tuple[RunJournal, RunBuilder]:
    """A journal with a started run and one proposal, still open (locked)."""
    b = RunBuilder()
    j = RunJournal.create(path)
    j.append(b.started())
    j.append(b.proposed(0))
    return j, b


def _finish(j: RunJournal, b: RunBuilder) -> Callable[[], None]:
    def writer_finishes() -> None:
        j.append(b.log("done"))
        j.append(b.finished(status="stopped", reason="max_evaluations reached"))
        j.close()  # releases the lock: the search process is done

    return writer_finishes


def test_list_runs_never_shows_a_finishing_run_as_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    j, b = _running(journal_path(db, "run-a"))
    with HookedStore(db) as store:
        row = store.list_runs().iloc[0]
        assert (row["status"], row["n_events"]) == ("running", 2)
        store.after_ingest = _finish(j, b)
        row = store.list_runs().iloc[0]  # the writer finishes between ingest and lock probe
        assert (row["status"], row["status_label"], row["reason"], row["n_events"]) == (
            "stopped",
            "stopped: max_evaluations reached",
            "max_evaluations reached",
            4,
        )
        assert store.after_ingest is None  # the hook did run inside that call
        assert store.reads == ["all", "all", "run-a.jsonl"]  # the free journal read again


def test_get_run_never_shows_a_finishing_run_as_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    j, b = _running(journal_path(db, "run-a"))
    with HookedStore(db) as store:
        run = store.get_run("run-a")
        assert run is not None and run.status == "running"
        store.after_ingest = _finish(j, b)
        run = store.get_run("run-a")
        assert run is not None
        assert (run.status, run.reason, run.n_events) == ("stopped", "max_evaluations reached", 4)
        assert store.reads == ["all", "all", "run-a.jsonl"]


def test_the_journal_view_never_shows_a_finishing_run_as_interrupted(tmp_path: Path) -> None:
    journals = tmp_path / "runs.duckdb.journals"
    j, b = _running(journals / "run-a.jsonl")
    with HookedStore.from_journals(journals) as view:
        assert view.list_runs().iloc[0]["status"] == "running"
        view.after_ingest = _finish(j, b)
        assert view.list_runs().iloc[0]["status"] == "stopped"


@pytest.mark.parametrize("query", ["list_runs", "get_run"])
def test_a_writer_that_dies_after_the_ingest_is_interrupted_with_its_last_events(
    tmp_path: Path, query: str
) -> None:
    """The second read does not hide a real interruption: a writer that wrote more and then
    died (no `run_finished`) is interrupted, with the events it wrote last counted."""
    db = tmp_path / "runs.duckdb"
    j, b = _running(journal_path(db, "run-a"))

    def writer_dies() -> None:
        j.append(b.log("about to crash"))
        j.close()

    with HookedStore(db) as store:
        store.after_ingest = writer_dies
        if query == "list_runs":
            row = store.list_runs().iloc[0]
            got = (row["status"], int(row["n_events"]))
            assert row["status_label"] == (
                "interrupted (no process writes it), data as of 2023-11-14 22:13:22 UTC; "
                "resume it with --resume"
            )
        else:
            run = store.get_run("run-a")
            assert run is not None
            got = (run.status, run.n_events)
        assert got == ("interrupted", 3)


def test_a_live_writer_reads_running_and_costs_one_ingest(tmp_path: Path) -> None:
    """No second read while the journal is held: only a free journal is read again."""
    db = tmp_path / "runs.duckdb"
    j, _ = _running(journal_path(db, "run-a"))
    try:
        with HookedStore(db) as store:
            assert store.list_runs().iloc[0]["status"] == "running"
            run = store.get_run("run-a")
            assert run is not None and run.status == "running"
            assert store.reads == ["all", "all"]
    finally:
        j.close()


def test_without_auto_ingest_statuses_are_as_of_the_last_ingest(tmp_path: Path) -> None:
    """`auto_ingest=False` never reads journals on its own, not even a free one."""
    db = tmp_path / "runs.duckdb"
    j, b = _running(journal_path(db, "run-a"))
    with HookedStore(db, auto_ingest=False) as store:
        store.ingest()
        _finish(j, b)()
        assert store.list_runs().iloc[0]["status"] == "interrupted"
        store.ingest()
        assert store.list_runs().iloc[0]["status"] == "stopped"
