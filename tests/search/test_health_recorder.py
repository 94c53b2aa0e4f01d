"""`HealthRecorder` (the Runs page shows the workers' health while a run executes): the driver of a
search on a remote executor keeps its workers' latest health beside the journal, every interval and
after each evaluated candidate, writing nothing for an executor without workers and never failing
the search."""

from __future__ import annotations

import threading
from pathlib import Path

from core.search.events import CandidateEvaluated, LogMessage, RunStarted
from core.search.subscribers import HealthRecorder
from core.storage.health import health_path, read_health
from core.vocab.health import WorkerHealth

RUN = "20250101-120000-abc123"


class FakeExecutor:
    """A test double: workers whose `runs` count up by one at each `health()`."""

    def __init__(self, n: int = 2, *, fail: bool = False) -> None:
        self.n = n
        self.fail = fail
        self.calls = 0
        self.asked = threading.Event()

    def start(self) -> None: ...

    def describe(self) -> str:
        return f"fake: {self.n} workers"

    def health(self) -> list[WorkerHealth]:
        self.calls += 1
        self.asked.set()
        if self.fail:
            raise RuntimeError("the cluster went away")
        return [
            WorkerHealth(name=f"worker-{i}", state="alive", node="10.0.0.9", runs=self.calls)
            for i in range(self.n)
        ]

    def close(self) -> None: ...


def _started() -> RunStarted:
    return RunStarted(run_id=RUN, seq=0, ts=0.0, problem="p", strategy="random", seed=1)


def _evaluated() -> CandidateEvaluated:
    return CandidateEvaluated(
        run_id=RUN, seq=5, ts=1.0, candidate_idx=0, spec_hash="h", split="validation",
        n_examples=4, accuracy=0.5, cost_usd=0.0, latency_ms=1.0, n_agents=1, depth=1,
        aggregate_score=0.5, valid=True,
    )  # fmt: skip


def test_an_evaluated_candidate_wakes_a_snapshot_and_close_takes_the_last(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    fake = FakeExecutor()
    # an hour between timed snapshots: only the events and close take them
    with HealthRecorder(fake, db, RUN, interval_s=3600.0, clock=lambda: 1000.0) as recorder:
        recorder(LogMessage(run_id=RUN, seq=1, ts=0.5, message="hi"))  # not a waking event
        assert not fake.asked.wait(0.3)
        recorder(_evaluated())
        assert fake.asked.wait(10.0)
        for _ in range(100):
            if recorder.written == 1:
                break
            threading.Event().wait(0.05)
        first = read_health(db, RUN)
        assert first is not None
        assert (first.executor, first.taken_at) == ("fake: 2 workers", 1000.0)
        assert [(w.name, w.node, w.runs) for w in first.workers] == [
            ("worker-0", "10.0.0.9", 1),
            ("worker-1", "10.0.0.9", 1),
        ]
    last = read_health(db, RUN)
    assert last is not None and [w.runs for w in last.workers] == [2, 2]
    assert recorder.written == 2


def test_snapshots_come_every_interval_without_events(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    fake = FakeExecutor(n=3)
    recorder = HealthRecorder(fake, db, RUN, interval_s=0.05).start()
    try:
        for _ in range(200):
            if recorder.written >= 3:
                break
            threading.Event().wait(0.05)
    finally:
        recorder.close()
    got = read_health(db, RUN)
    assert recorder.written >= 4  # three timed, one at close
    assert got is not None and len(got.workers) == 3
    assert got.workers[0].runs == fake.calls  # the latest replaced the others


def test_no_workers_writes_nothing_and_a_failure_never_stops_the_search(tmp_path: Path) -> None:
    db = tmp_path / "runs.duckdb"
    none = HealthRecorder(FakeExecutor(n=0), db, RUN, interval_s=3600.0)
    with none:
        none(_started())
    assert none.written == 0 and read_health(db, RUN) is None
    assert not health_path(db, RUN).exists()
    broken = FakeExecutor(fail=True)
    with HealthRecorder(broken, db, RUN, interval_s=3600.0) as recorder:
        recorder(_started())
        assert broken.asked.wait(10.0)
    assert recorder.written == 0 and broken.calls == 2  # woken, then at close; both logged
