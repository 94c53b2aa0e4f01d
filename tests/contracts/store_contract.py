"""The shared run-store contract suite (see `core.storage.base.RunStore`'s docstring).

Every `RunStore` implementation runs it: subclass `StoreContract` in a test file, name the
subclass `Test...`, and implement `make_store(tmp_path)` (a fresh, empty, writable store). The
suite closes the store after each test. A store that ingests run journals also implements
`journals(tmp_path)`: the folder its `ingest` reads (the journal tests then write files there).

`RunBuilder` makes a run's events with consecutive `seq` and deterministic times (`ts` =
`t0 + seq`), so expected values can be written down exactly.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from core.errors import StoreError
from core.search.events import (
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.storage import RunStore, encode_event

T0 = 1_700_000_000.0
"""The builder's first event time (2023-11-14 22:13:20 UTC)."""


class RunBuilder:
    """Events of one run with consecutive `seq` and `ts = t0 + seq`."""

    def __init__(self, run_id: str = "run-a", t0: float = T0, seq: int = 0) -> None:
        self.run_id = run_id
        self.t0 = t0
        self.seq = seq

    def _head(self) -> dict[str, Any]:
        head = {"run_id": self.run_id, "seq": self.seq, "ts": self.t0 + self.seq}
        self.seq += 1
        return head

    def started(self, **kw: Any) -> RunStarted:
        args: dict[str, Any] = {"problem": "letters", "strategy": "random", "seed": 7}
        return RunStarted(**self._head(), **(args | kw))

    def proposed(self, idx: int, **kw: Any) -> CandidateProposed:
        args: dict[str, Any] = {
            "candidate_idx": idx,
            "generation": -1 if idx == 0 else 0,
            "spec_hash": f"h{idx}",
            "spec_json": f'{{"kind": "pipeline", "name": "c{idx}"}}',
            "operator": "seed" if idx == 0 else "mutate",
            "parent_idx": None if idx == 0 else 0,
        }
        return CandidateProposed(**self._head(), **(args | kw))

    def example(self, idx: int, example_id: str, accuracy: float, **kw: Any) -> ExampleEvaluated:
        args: dict[str, Any] = {
            "candidate_idx": idx,
            "spec_hash": f"h{idx}",
            "split": "validation",
            "example_id": example_id,
            "accuracy": accuracy,
            "cost_usd": 0.001,
            "latency_ms": 10.0,
        }
        return ExampleEvaluated(**self._head(), **(args | kw))

    def result(
        self, idx: int, accuracy: float, cost_usd: float, score: float, **kw: Any
    ) -> CandidateEvaluated:
        args: dict[str, Any] = {
            "candidate_idx": idx,
            "spec_hash": f"h{idx}",
            "split": "validation",
            "n_examples": 2,
            "accuracy": accuracy,
            "cost_usd": cost_usd,
            "latency_ms": 100.0,
            "n_agents": 1,
            "depth": 1,
            "aggregate_score": score,
        }
        return CandidateEvaluated(**self._head(), **(args | kw))

    def snapshot(
        self,
        entries: list[int],
        front: list[int],
        best_idx: int | None,
        best_score: float | None,
        **kw: Any,
    ) -> ArchiveSnapshot:
        args: dict[str, Any] = {
            "generation": 0,
            "entries": entries,
            "front": front,
            "best_idx": best_idx,
            "best_score": best_score,
        }
        return ArchiveSnapshot(**self._head(), **(args | kw))

    def log(self, message: str, level: str = "info") -> LogMessage:
        return LogMessage(**self._head(), level=level, message=message)  # type: ignore[arg-type]

    def finished(self, status: str = "completed", **kw: Any) -> RunFinished:
        return RunFinished(**self._head(), status=status, **kw)  # type: ignore[arg-type]


def small_run(run_id: str = "run-a") -> list[SearchEvent]:
    """A finished run: seed (0.5 accuracy) and one better candidate (1.0), two examples each."""
    b = RunBuilder(run_id)
    return [
        b.started(config={"budget": {"max_evaluations": 4}}),
        b.proposed(0),
        b.example(0, "e1", 1.0),
        b.example(0, "e2", 0.0),
        b.result(0, 0.5, 0.001, 0.49),
        b.proposed(1, thought="add a verifier"),
        b.example(1, "e1", 1.0, cost_usd=0.002),
        b.example(1, "e2", 1.0, cost_usd=0.002),
        b.result(1, 1.0, 0.002, 0.98),
        b.snapshot([0, 1], [0, 1], 1, 0.98),
        b.finished(best_idx=1, budget_used={"evaluations": 4.0, "usd": 0.006}),
    ]


class StoreContract:
    """The behaviour every `RunStore` keeps. Subclass it and implement `make_store`."""

    def make_store(self, tmp_path: Path) -> RunStore:
        """A fresh, empty, writable store."""
        raise NotImplementedError

    def journals(self, tmp_path: Path) -> Path | None:
        """The folder of run journals the store from `make_store(tmp_path)` ingests; None when
        it reads no journals (then the journal tests check only the empty answers)."""
        return None

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[RunStore]:
        s = self.make_store(tmp_path)
        try:
            yield s
        finally:
            s.close()

    # ---- runs -------------------------------------------------------------------------------

    def test_a_new_store_has_no_runs(self, store: RunStore) -> None:
        runs = store.list_runs()
        assert len(runs) == 0
        assert list(runs.columns) == [
            "run_id", "problem", "strategy", "seed", "status", "status_label", "reason",
            "started_at", "finished_at", "last_event_at", "wall_s", "n_events", "n_resumes",
            "n_candidates", "n_evaluations", "cost_usd", "design_cost_usd", "design_requests",
            "design_input_tokens", "design_output_tokens", "best_idx", "best_score",
            "parent_run_id", "executor",
        ]  # fmt: skip
        assert store.get_run("nope") is None
        assert store.read_only is False

    def test_a_run_says_where_it_executed_and_an_old_run_is_local(self, store: RunStore) -> None:
        """`executor`: the run's `config.executor` (`Executor.describe()`); "local" for a run
        recorded without one (before executors existed)."""
        store.record_events([RunBuilder("old").started(config={})])
        ray = "ray: 2 workers, local 127.0.0.1"
        store.record_events([RunBuilder("r").started(config={"executor": ray})])
        store.record_events([RunBuilder("l").started(config={"executor": "local"})])
        runs = store.list_runs()
        got = dict(zip(runs["run_id"], runs["executor"], strict=True))
        assert got == {"old": "local", "r": ray, "l": "local"}

    def test_phase_2_of_a_run_names_its_search(self, store: RunStore) -> None:
        """`parent_run_id`: phase 2 of `search --then-prompts` (config.phase "prompts") names
        the search it follows; any other run, even one with a parent_run_id in its config
        (an editor evaluation), has None."""
        b = RunBuilder("p2")
        store.record_events(small_run("s1"))
        store.record_events(
            [b.started(config={"phase": "prompts", "parent_run_id": "s1"}, strategy="gepa")]
        )
        e = RunBuilder("e1")
        store.record_events([e.started(config={"parent_run_id": "s1"})])
        runs = store.list_runs()
        # a missing one reads as pandas gives it (NaN here), never a string
        got = {
            r: p if isinstance(p, str) else None
            for r, p in zip(runs["run_id"], runs["parent_run_id"], strict=True)
        }
        assert got == {"s1": None, "p2": "s1", "e1": None}
        # the same link without a DataFrame (what `show` reads)
        assert (store.phase_two_run("s1"), store.phase_two_run("p2")) == ("p2", None)
        assert store.phase_two_run("e1") is None

    def test_a_run_is_running_until_run_finished(self, store: RunStore) -> None:
        events = small_run()
        assert store.record_events(events[:3]) == 3
        row = store.list_runs().iloc[0]
        assert row["status"] == "running"
        assert row["status_label"] == "running, data as of 2023-11-14 22:13:22 UTC"
        assert row["last_event_at"] == T0 + 2
        assert row["n_events"] == 3
        run = store.get_run("run-a")
        assert run is not None
        assert (run.status, run.problem, run.strategy, run.seed) == (
            "running",
            "letters",
            "random",
            7,
        )
        assert run.config == {"budget": {"max_evaluations": 4}}
        assert (run.started_at, run.finished_at, run.last_event_at) == (T0, None, T0 + 2)

        assert store.record_events(events[3:]) == len(events) - 3
        row = store.list_runs().iloc[0]
        assert (row["status"], row["status_label"]) == ("completed", "completed")
        assert (row["started_at"], row["finished_at"], row["wall_s"]) == (T0, T0 + 10, 10.0)
        assert (row["n_events"], row["n_candidates"], row["n_evaluations"]) == (11, 2, 4)
        assert row["cost_usd"] == pytest.approx(0.006)
        assert (row["best_idx"], row["best_score"]) == (1, 0.98)
        run = store.get_run("run-a")
        assert run is not None
        assert (run.status, run.finished_at, run.best_idx) == ("completed", T0 + 10, 1)
        assert run.budget_used == {"evaluations": 4.0, "usd": 0.006}

    def test_a_failed_run_shows_its_reason(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events(
            [b.started(), b.finished("failed", reason="DegenerateSeedError: blank")]
        )
        row = store.list_runs().iloc[0]
        assert (row["status"], row["status_label"]) == (
            "failed",
            "failed: DegenerateSeedError: blank",
        )

    def test_runs_are_listed_newest_first(self, store: RunStore) -> None:
        store.record_events([RunBuilder("old", t0=T0).started()])
        store.record_events([RunBuilder("new", t0=T0 + 100).started()])
        assert store.list_runs()["run_id"].tolist() == ["new", "old"]

    def test_a_resumed_run_is_running_again_then_finishes(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([b.started(), b.finished("stopped", reason="SIGINT")])
        store.record_events([b.started(resumed=True)])
        run = store.get_run("run-a")
        assert run is not None
        assert (run.status, run.n_resumes, run.finished_at, run.reason) == (
            "running",
            1,
            None,
            None,
        )
        assert run.started_at == T0  # the first start
        store.record_events([b.finished()])
        run = store.get_run("run-a")
        assert run is not None
        assert (run.status, run.finished_at) == ("completed", T0 + 3)

    def test_recording_events_twice_stores_them_once(self, store: RunStore) -> None:
        events = small_run()
        assert store.record_events(events) == 11
        assert store.record_events(events) == 0
        assert store.record_events(reversed(events)) == 0
        row = store.list_runs().iloc[0]
        assert (row["n_events"], row["n_candidates"], row["n_evaluations"]) == (11, 2, 4)
        assert len(store.candidate_examples("run-a", 0)) == 2
        assert len(store.progress("run-a")) == 2

    def test_a_replayed_result_under_a_new_seq_is_not_a_second_row(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([b.started(), b.proposed(0), b.example(0, "e1", 1.0)])
        # a resumed search re-emits what it recorded, with new seq numbers
        store.record_events([b.proposed(0), b.example(0, "e1", 1.0, cached=True)])
        examples = store.candidate_examples("run-a", 0)
        assert examples["seq"].tolist() == [2]
        assert examples["cached"].tolist() == [False]
        assert store.list_runs().iloc[0]["n_candidates"] == 1

    # ---- specs and candidates ----------------------------------------------------------------

    def test_specs_are_stored_once_by_hash(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([b.started(), b.proposed(0, spec_hash="same", spec_json='{"v": 1}')])
        store.record_events([b.proposed(1, spec_hash="same", spec_json='{"v": 1, "id": "x"}')])
        assert store.get_spec("same") == '{"v": 1}'
        assert store.put_spec("same", '{"v": 2}') is False
        assert store.get_spec("same") == '{"v": 1}'
        assert store.put_spec("other", '{"v": 3}') is True
        assert store.get_spec("other") == '{"v": 3}'
        assert store.get_spec("missing") is None
        with pytest.raises(StoreError):
            store.put_spec("", "{}")

    def test_candidates_keep_generation_parent_operator_thought_and_status(
        self, store: RunStore
    ) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0),
            b.result(0, 0.5, 0.001, 0.49),
            b.proposed(1, generation=0, parent_idx=0, operator="meta_agent", thought="ensemble"),
            b.result(1, 0.75, 0.001, 0.73),  # dominates the seed
            b.proposed(2, spec_hash="", spec_json="not json at all", status="rejected",
                       reason="max_depth_exceeded: depth 5 > 4"),
            b.proposed(3, spec_hash="h1", status="duplicate"),
        ])  # fmt: skip
        arch = store.archive("run-a", include_unevaluated=True)
        assert arch["candidate_idx"].tolist() == [0, 1, 2, 3]
        assert arch["generation"].tolist() == [-1, 0, 0, 0]
        assert arch["parent_idx"].tolist()[1:] == [0, 0, 0]
        assert arch["operator"].tolist() == ["seed", "meta_agent", "mutate", "mutate"]
        assert arch["thought"].tolist() == ["", "ensemble", "", ""]
        assert arch["candidate_status"].tolist() == [
            "proposed",
            "proposed",
            "rejected",
            "duplicate",
        ]
        assert arch["valid"].tolist() == [True, True, False, False]
        assert arch["invalid_reason"].tolist()[2:] == [
            "rejected: max_depth_exceeded: depth 5 > 4",
            "duplicate",
        ]
        assert arch["on_front"].tolist() == [False, True, False, False]
        assert arch["is_best"].tolist() == [False, True, False, False]
        # by default only evaluated candidates are in the archive
        assert store.archive("run-a")["candidate_idx"].tolist() == [0, 1]

    # ---- per-example results -----------------------------------------------------------------

    def test_per_example_results_of_a_candidate(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0),
            b.example(0, "e2", 0.0, status="error", error="PipelineStepError: boom",
                      input_tokens=5, output_tokens=0, requests=1),
            b.example(0, "e1", 1.0, input_tokens=12, output_tokens=30, requests=2,
                      output_summary="#### 72", trace=[{"span_id": 0, "name": "solver"}]),
            b.example(0, "t1", 1.0, split="test"),
        ])  # fmt: skip
        df = store.candidate_examples("run-a", 0)
        assert list(df.columns) == [
            "split", "example_id", "trial", "accuracy", "cost_usd", "latency_ms", "input_tokens",
            "output_tokens", "requests", "status", "error", "output_summary", "cached", "seq", "ts",
        ]  # fmt: skip
        assert df["example_id"].tolist() == ["t1", "e1", "e2"]  # by split, then example
        assert df["split"].tolist() == ["test", "validation", "validation"]
        row = df.iloc[1]
        assert (row["accuracy"], row["input_tokens"], row["output_tokens"], row["requests"]) == (
            1.0,
            12,
            30,
            2,
        )
        assert (row["status"], row["output_summary"], row["seq"], row["ts"]) == (
            "ok",
            "#### 72",
            3,
            T0 + 3,
        )
        assert (df.iloc[2]["status"], df.iloc[2]["error"]) == ("error", "PipelineStepError: boom")
        only_val = store.candidate_examples("run-a", 0, split="validation")
        assert only_val["example_id"].tolist() == ["e1", "e2"]
        assert store.example_accuracies("run-a", 0) == [
            ("t1", 0, 1.0),
            ("e1", 0, 1.0),
            ("e2", 0, 0.0),
        ]
        assert store.example_accuracies("run-a", 0, split="validation") == [
            ("e1", 0, 1.0),
            ("e2", 0, 0.0),
        ]
        assert store.example_accuracies("run-a", 9) == []
        assert store.example_trace("run-a", 0, "e1") == [{"span_id": 0, "name": "solver"}]
        assert store.example_trace("run-a", 0, "e2") == []
        assert store.example_trace("run-a", 0, "nope") is None
        with_trace = store.candidate_examples("run-a", 0, with_trace=True)
        assert with_trace.iloc[1]["trace"] == '[{"span_id":0,"name":"solver"}]'

    def test_a_big_trace_round_trips_as_one_value(self, store: RunStore) -> None:
        spans = [
            {"span_id": i, "parent_id": i - 1 if i else None, "name": f"step{i}", "duration_ms": i / 3,
             "attributes": {"route": "math", "raw": "Math ", "fallback": False}, "error": None}
            for i in range(2000)
        ]  # fmt: skip
        b = RunBuilder()
        store.record_events([b.started(), b.proposed(0), b.example(0, "e1", 1.0, trace=spans)])
        assert store.example_trace("run-a", 0, "e1") == spans

    def test_trials_are_separate_rows(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events(
            [b.started(), b.example(0, "e1", 1.0, trial=0), b.example(0, "e1", 0.0, trial=1)]
        )
        df = store.candidate_examples("run-a", 0)
        assert (df["trial"].tolist(), df["accuracy"].tolist()) == ([0, 1], [1.0, 0.0])
        assert store.example_trace("run-a", 0, "e1", trial=1) == []

    # ---- archive, front and best (F7) --------------------------------------------------------

    def test_front_and_best_over_valid_entries(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.8, 0.010, 0.70),
            b.result(1, 0.6, 0.001, 0.59),
            b.result(2, 0.5, 0.020, 0.30),  # dominated by 0
            b.result(3, 0.8, 0.010, 0.70),  # ties 0: both stay on the front
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["on_front"].tolist() == [True, True, False, True]
        assert arch["is_best"].tolist() == [True, False, False, False]  # tie: lowest index
        assert arch["objective_split"].tolist() == ["validation"] * 4

    def test_a_same_as_candidate_names_its_twin_and_never_stands_on_the_front(
        self, store: RunStore
    ) -> None:
        """A candidate that behaved exactly like an earlier one (deduplication by behaviour) keeps
        its figures and names the twin; the twin alone is on the front and can be best."""
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.8, 0.010, 0.70),
            b.result(1, 0.6, 0.001, 0.59),
            b.result(2, 0.8, 0.010, 0.70, same_as=0),  # same answers and costs as 0
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["same_as"].isna().tolist() == [True, True, False]
        assert int(arch["same_as"].iloc[2]) == 0
        assert arch["valid"].tolist() == [True, True, True]
        assert arch["on_front"].tolist() == [True, True, False]
        assert arch["is_best"].tolist() == [True, False, False]
        assert store.test_front("run-a")["candidate_idx"].tolist() == [1, 0]

    def test_nan_and_infinite_objectives_are_never_on_the_front_nor_best(
        self, store: RunStore
    ) -> None:
        """F7: a NaN score and an infinite cost are invalid, with a reason, in every query."""
        nan, inf = math.nan, math.inf
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0), b.example(0, "e1", 0.5), b.result(0, 0.5, 0.010, 0.45),
            # the score function returned NaN: marked invalid by the search
            b.proposed(1), b.example(1, "e1", nan, status="invalid", error="nan score"),
            b.result(1, nan, 0.001, nan, valid=False, invalid_reason="nan_accuracy"),
            # an infinite cost the search failed to mark: the store marks it anyway
            b.proposed(2), b.example(2, "e1", 0.9, cost_usd=inf),
            b.result(2, 0.9, inf, 0.95),
            b.proposed(3), b.example(3, "e1", 0.4), b.result(3, 0.4, 0.0005, 0.39),
            b.snapshot([0, 1, 2, 3], [0, 1, 2, 3], 2, 0.95),
            b.snapshot([0, 1, 2, 3], [0, 1, 3], 1, nan),
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["valid"].tolist() == [True, False, False, True]
        assert arch["invalid_reason"].tolist()[1:3] == ["nan_accuracy", "inf_cost_usd"]
        assert arch["on_front"].tolist() == [True, False, False, True]
        assert arch["is_best"].tolist() == [True, False, False, False]
        assert arch["snapshot_front"].tolist() == [True, False, False, True]
        run = store.list_runs().iloc[0]
        assert (run["best_idx"], run["best_score"]) == (0, 0.45)
        assert run["cost_usd"] == pytest.approx(0.003)  # the infinite cost is not summed
        prog = store.progress("run-a")
        assert prog["valid"].tolist() == [True, False, False, True]
        assert prog["best_score"].tolist() == [0.45, 0.45, 0.45, 0.45]
        assert prog["n_unpriced"].tolist() == [0, 0, 1, 1]
        snaps = store.snapshots("run-a")
        assert snaps["front"].tolist() == [[0, 3], [0, 3]]
        assert snaps["best_idx"].isna().tolist() == [True, True]
        assert snaps["best_score"].isna().tolist() == [True, True]

    def test_archive_records_are_the_archive_rows_with_missing_values_as_none(
        self, store: RunStore
    ) -> None:
        """`archive_records` (read without pandas) holds `archive`'s rows, columns and order, a
        missing value (NaN / NA in the frame) as None: the invalid NaN row keeps its NaN score
        as None, the unevaluated candidate its missing figures."""
        nan = math.nan
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0), b.example(0, "e1", 0.5), b.result(0, 0.5, 0.010, 0.45),
            b.proposed(1), b.example(1, "e1", nan, status="invalid", error="nan score"),
            b.result(1, nan, 0.001, nan, valid=False, invalid_reason="nan_accuracy"),
            b.proposed(2),
        ])  # fmt: skip
        frame = store.archive("run-a", include_unevaluated=True)
        rows = store.archive_records("run-a", include_unevaluated=True)
        assert [list(r) for r in rows] == [list(frame.columns)] * 3
        assert [r["candidate_idx"] for r in rows] == [0, 1, 2]
        assert [r["accuracy"] for r in rows] == [0.5, None, None]
        assert [r["cost_usd"] for r in rows] == [0.010, 0.001, None]
        assert [r["valid"] for r in rows] == [True, False, False]
        assert [r["invalid_reason"] for r in rows] == [None, "nan_accuracy", "not_evaluated"]
        assert [r["on_front"] for r in rows] == [True, False, False]
        assert [r["is_best"] for r in rows] == [True, False, False]
        assert [r["same_as"] for r in rows] == [None, None, None]
        assert store.archive_records("nope") == []

    def test_front_records_are_the_test_front_rows(self, store: RunStore) -> None:
        """`test_front_records` holds `test_front`'s rows (`TEST_FRONT_COLUMNS`), a candidate
        not scored on test with `test_n_examples` 0 and NaN test figures."""
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.8, 0.010, 0.70),
            b.result(1, 0.6, 0.001, 0.59),
            b.result(0, 0.75, 0.011, 0.66, split="test"),
        ])  # fmt: skip
        rows = store.test_front_records("run-a")
        frame = store.test_front("run-a")
        assert [list(r) for r in rows] == [list(frame.columns)] * 2
        assert [r["candidate_idx"] for r in rows] == [1, 0]
        assert [r["test_n_examples"] for r in rows] == [0, 2]
        assert math.isnan(rows[0]["test_accuracy"])
        assert rows[1]["test_accuracy"] == 0.75
        assert [r["on_test_front"] for r in rows] == [False, True]
        assert store.test_front_records("nope") == []

    @pytest.mark.parametrize("column", ["accuracy", "cost_usd", "latency_ms", "aggregate_score"])
    @pytest.mark.parametrize(
        ("bad", "kind"), [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "inf")]
    )
    def test_a_non_finite_objective_is_never_best_anywhere(
        self, store: RunStore, column: str, bad: float, kind: str
    ) -> None:
        """F7 for every objective column and every non-finite value: DuckDB sorts NaN as the
        largest value, so candidate 1 (otherwise better in every way) would top any unfiltered
        "best" ordering. It is invalid with its reason in every query, never on a front."""
        b = RunBuilder()
        values: dict[str, float] = {"accuracy": 0.9, "cost_usd": 0.001, "aggregate_score": 0.9}
        values[column] = bad
        store.record_events([
            b.started(),
            b.result(0, 0.5, 0.01, 0.45),
            b.result(1, values["accuracy"], values["cost_usd"], values["aggregate_score"],
                     latency_ms=bad if column == "latency_ms" else 50.0),
            b.snapshot([0, 1], [0, 1], 1, 0.9),
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["valid"].tolist() == [True, False]
        assert arch["invalid_reason"].isna().tolist() == [True, False]
        assert arch["invalid_reason"].tolist()[1] == f"{kind}_{column}"
        assert arch["on_front"].tolist() == [True, False]
        assert arch["is_best"].tolist() == [True, False]
        assert arch["snapshot_front"].tolist() == [True, False]
        run = store.list_runs().iloc[0]
        assert (run["best_idx"], run["best_score"]) == (0, 0.45)
        prog = store.progress("run-a")
        assert prog["valid"].tolist() == [True, False]
        assert prog["best_score"].tolist() == [0.45, 0.45]
        assert prog["score"].tolist()[0] == 0.45 and math.isnan(prog["score"].tolist()[1])
        snap = store.snapshots("run-a").iloc[0]
        assert (snap["front"], snap["best_idx"], snap["best_score"]) == ([0], None, None)

    def test_a_rejected_candidate_with_a_result_is_invalid(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0), b.result(0, 0.5, 0.01, 0.45),
            b.proposed(1, status="rejected", reason="max_depth_exceeded: depth 5 > 4"),
            b.result(1, 1.0, 0.001, 0.99),  # scored anyway: still never best
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["valid"].tolist() == [True, False]
        assert arch["invalid_reason"].tolist()[1] == "rejected: max_depth_exceeded: depth 5 > 4"
        assert (arch["on_front"].tolist(), arch["is_best"].tolist()) == (
            [True, False],
            [True, False],
        )
        run = store.list_runs().iloc[0]
        assert (run["best_idx"], run["best_score"]) == (0, 0.45)
        assert store.progress("run-a")["best_score"].tolist() == [0.45, 0.45]

    def test_a_non_finite_value_of_a_chosen_objective_keeps_it_off_the_front(
        self, store: RunStore
    ) -> None:
        from core.search.pareto import Objective

        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.5, 0.01, 0.45, stdev=0.2),
            b.result(1, 0.9, 0.001, 0.9, stdev=math.nan),
            b.result(2, 0.4, 0.02, 0.35, stdev=0.3),
        ])  # fmt: skip
        arch = store.archive("run-a", objectives=[Objective("stdev", "min")])
        assert arch["on_front"].tolist() == [True, False, False]
        assert arch["valid"].tolist() == [True, True, True]  # stdev is not a default objective

    def test_queries_on_a_run_with_only_its_start(self, store: RunStore) -> None:
        store.record_events([RunBuilder().started()])
        row = store.list_runs().iloc[0]
        assert (row["status"], row["n_events"], row["n_candidates"], row["n_evaluations"]) == (
            "running",
            1,
            0,
            0,
        )
        assert (row["cost_usd"], row["best_idx"], row["best_score"], row["wall_s"]) == (
            0.0,
            None,
            None,
            0.0,
        )
        assert len(store.archive("run-a")) == 0
        assert len(store.archive("run-a", include_unevaluated=True)) == 0
        assert len(store.archive("run-a", split="validation")) == 0
        assert len(store.candidate_examples("run-a", 0)) == 0
        assert store.example_trace("run-a", 0, "e1") is None
        assert len(store.compare_candidates("run-a", 0, 1)) == 0
        assert list(store.progress("run-a").columns)[:3] == ["seq", "ts", "candidate_idx"]
        assert len(store.progress("run-a")) == 0
        assert list(store.snapshots("run-a").columns)[:3] == ["seq", "ts", "generation"]
        assert len(store.snapshots("run-a")) == 0
        assert len(store.logs("run-a")) == 0

    def test_runs_list_counts_and_costs(self, store: RunStore) -> None:
        """`n_evaluations` counts example evaluations that were not cache hits; `cost_usd` is
        their finite cost plus the finite design cost."""
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0, design_cost_usd=0.25),
            b.example(0, "e1", 1.0, cost_usd=0.01),
            b.example(0, "e2", 1.0, cost_usd=0.02, cached=True),  # free: a cache hit
            b.example(0, "e3", 1.0, cost_usd=math.inf),  # unpriced
            b.proposed(1, design_cost_usd=math.nan),
            b.example(1, "e1", 0.0, cost_usd=0.04),
        ])  # fmt: skip
        row = store.list_runs().iloc[0]
        assert (row["n_candidates"], row["n_evaluations"]) == (2, 3)
        assert row["cost_usd"] == pytest.approx(0.3)

    def test_runs_list_sums_the_designers_requests_and_tokens_apart(self, store: RunStore) -> None:
        """`design_requests`, `design_input_tokens`, `design_output_tokens`: the designer's own
        calls over the run's proposals; the candidates' example tokens are not among them."""
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0),
            b.example(0, "e1", 1.0, input_tokens=100, output_tokens=20),
            b.proposed(1, design_cost_usd=0.25, design_requests=3, design_input_tokens=2700,
                       design_output_tokens=240),
            b.proposed(2, design_cost_usd=0.05, design_requests=1, design_input_tokens=900,
                       design_output_tokens=80),
        ])  # fmt: skip
        row = store.list_runs().iloc[0]
        assert (
            row["design_cost_usd"],
            row["design_requests"],
            row["design_input_tokens"],
            row["design_output_tokens"],
        ) == (pytest.approx(0.3), 4, 3600, 320)

    def test_objectives_prefer_the_full_validation_result(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.9, 0.01, 0.89, split="minibatch", n_examples=5),
            b.result(0, 0.6, 0.01, 0.59, split="validation", n_examples=300),
            b.result(0, 0.5, 0.01, 0.49, split="minibatch", n_examples=5),
            b.result(1, 0.99, 0.01, 0.98, split="minibatch", n_examples=5),
            b.result(0, 0.55, 0.01, 0.54, split="test", n_examples=1000),
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["objective_split"].tolist() == ["validation", "minibatch"]
        assert arch["accuracy"].tolist() == [0.6, 0.99]
        assert arch["n_examples"].tolist() == [300, 5]
        # best compares like with like: the validated candidate, not the lucky minibatch
        assert arch["is_best"].tolist() == [True, False]
        assert arch["test_accuracy"].tolist()[0] == 0.55
        assert arch["test_aggregate_score"].tolist()[0] == 0.54
        run = store.list_runs().iloc[0]
        assert (run["best_idx"], run["best_score"]) == (0, 0.59)
        mini = store.archive("run-a", split="minibatch")
        assert mini["accuracy"].tolist() == [0.5, 0.99]  # the latest minibatch result
        assert mini["is_best"].tolist() == [False, True]
        assert store.archive("run-a", split="test")["candidate_idx"].tolist() == [0]

    def test_the_front_without_a_split_compares_like_with_like(self, store: RunStore) -> None:
        """A lucky 5-example minibatch never pushes a fully validated candidate off the front:
        without a split, the front (like the best) is taken among the valid entries of the most
        complete split present, as the search's own snapshots do (validation only)."""
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.9, 0.01, 0.89, split="minibatch", n_examples=5),
            b.result(0, 0.6, 0.01, 0.59, split="validation", n_examples=300),
            b.result(1, 0.99, 0.01, 0.98, split="minibatch", n_examples=5),  # never validated
            b.result(2, 0.5, 0.005, 0.49, split="validation", n_examples=300),  # cheaper
            b.result(3, 0.4, 0.02, 0.38, split="validation", n_examples=300),  # dominated by 0
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["objective_split"].tolist() == [
            "validation",
            "minibatch",
            "validation",
            "validation",
        ]
        assert arch["valid"].tolist() == [True, True, True, True]
        assert arch["on_front"].tolist() == [True, False, True, False]
        assert arch["is_best"].tolist() == [True, False, False, False]
        # one split asked for: the front of that split alone
        mini = store.archive("run-a", split="minibatch")
        assert mini["candidate_idx"].tolist() == [0, 1]
        assert mini["on_front"].tolist() == [False, True]
        val = store.archive("run-a", split="validation")
        assert val["on_front"].tolist() == [True, True, False]
        # with no validated candidate at all, the minibatch entries are compared together
        b2 = RunBuilder("run-b")
        store.record_events([
            b2.started(),
            b2.result(0, 0.7, 0.01, 0.69, split="minibatch"),
            b2.result(1, 0.8, 0.01, 0.79, split="minibatch"),
        ])  # fmt: skip
        assert store.archive("run-b")["on_front"].tolist() == [False, True]

    def test_archive_of_an_unknown_run_is_empty_with_columns(self, store: RunStore) -> None:
        arch = store.archive("nope")
        assert len(arch) == 0
        assert list(arch.columns) == [
            "candidate_idx", "generation", "parent_idx", "operator", "thought", "candidate_status",
            "reason", "spec_hash", "objective_split", "n_examples", "accuracy", "cost_usd",
            "latency_ms", "n_agents", "depth", "aggregate_score", "error_rate", "blank_rate",
            "stdev", "valid", "invalid_reason", "same_as", "on_front", "is_best", "in_snapshot",
            "snapshot_front", "test_accuracy", "test_aggregate_score",
        ]  # fmt: skip

    def test_archive_objectives_can_be_chosen(self, store: RunStore) -> None:
        from core.search.pareto import Objective

        b = RunBuilder()
        store.record_events(
            [b.started(), b.result(0, 0.8, 0.010, 0.70), b.result(1, 0.6, 0.001, 0.59)]
        )
        by_score = store.archive("run-a", objectives=[Objective("aggregate_score", "max")])
        assert by_score["on_front"].tolist() == [True, False]
        with pytest.raises(ValueError, match="unknown objective"):
            store.archive("run-a", objectives=[Objective("spec_hash", "max")])

    # ---- compare, progress, snapshots, logs --------------------------------------------------

    def test_two_candidates_compared_per_example(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.example(0, "e1", 1.0), b.example(1, "e1", 0.0),  # right -> wrong
            b.example(0, "e2", 0.0), b.example(1, "e2", 1.0),  # wrong -> right
            b.example(0, "e3", 1.0), b.example(1, "e3", 1.0),
            b.example(0, "e4", 0.0), b.example(1, "e4", 0.0, status="error", error="boom"),
            b.example(0, "e5", 1.0, trial=0), b.example(0, "e5", 0.0, trial=1),  # mean 0.5: right
            b.example(1, "e5", 0.0),
            b.example(0, "e6", 1.0),
            b.example(1, "e7", 1.0),
        ])  # fmt: skip
        df = store.compare_candidates("run-a", 0, 1)
        assert list(df.columns) == [
            "split", "example_id", "accuracy_a", "accuracy_b", "right_a", "right_b",
            "status_a", "status_b", "change",
        ]  # fmt: skip
        assert df["example_id"].tolist() == ["e1", "e2", "e3", "e4", "e5", "e6", "e7"]
        assert df["change"].tolist() == [
            "right_to_wrong", "wrong_to_right", "both_right", "both_wrong", "right_to_wrong",
            "only_a", "only_b",
        ]  # fmt: skip
        assert df["accuracy_a"].tolist()[4] == 0.5
        assert df["status_b"].tolist()[3] == "error"
        strict = store.compare_candidates("run-a", 0, 1, threshold=1.0)
        assert strict["change"].tolist()[4] == "both_wrong"
        # a NaN accuracy is wrong, whatever the threshold
        store.record_events([b.example(0, "e8", 1.0), b.example(1, "e8", math.nan)])
        nan_row = store.compare_candidates("run-a", 0, 1, threshold=0.0).iloc[-1]
        assert (nan_row["example_id"], nan_row["right_b"], nan_row["change"]) == (
            "e8",
            False,
            "right_to_wrong",
        )

    def test_candidates_of_two_runs_compared(self, store: RunStore) -> None:
        a, b = RunBuilder("run-a"), RunBuilder("run-b", t0=T0 + 50)
        store.record_events(
            [a.started(), a.example(3, "e1", 0.0), b.started(), b.example(0, "e1", 1.0)]
        )
        df = store.compare_candidates("run-a", 3, 0, run_id_b="run-b")
        assert df["change"].tolist() == ["wrong_to_right"]

    def test_cost_and_best_score_over_evaluations(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.proposed(0, design_cost_usd=0.0),
            b.example(0, "e1", 1.0, cost_usd=0.01), b.example(0, "e2", 0.0, cost_usd=0.01),
            b.result(0, 0.5, 0.01, 0.4, split="minibatch"),
            b.proposed(1, design_cost_usd=0.05),
            b.example(1, "e1", 1.0, cost_usd=0.02), b.example(1, "e2", 0.0, cost_usd=0.02),
            b.result(1, 0.5, 0.02, 0.3, split="minibatch"),
            b.example(1, "e3", 1.0, cost_usd=0.02, cached=True),
            b.result(1, 0.66, 0.02, 0.6, split="validation", n_examples=3),
            b.proposed(2, design_cost_usd=0.05),
            b.example(2, "e1", 1.0, cost_usd=math.nan),
            b.result(2, 1.0, math.nan, 0.9, split="minibatch", n_examples=1),
        ])  # fmt: skip
        p = store.progress("run-a")
        assert list(p.columns) == [
            "seq", "ts", "candidate_idx", "split", "n_evaluations", "cost_usd", "n_unpriced",
            "score", "valid", "best_score",
        ]  # fmt: skip
        assert p["candidate_idx"].tolist() == [0, 1, 1, 2]
        assert p["split"].tolist() == ["minibatch", "minibatch", "validation", "minibatch"]
        assert p["n_evaluations"].tolist() == [2, 4, 4, 5]
        assert p["cost_usd"].tolist() == pytest.approx([0.02, 0.11, 0.11, 0.16])
        assert p["n_unpriced"].tolist() == [0, 0, 0, 1]
        assert p["valid"].tolist() == [True, True, True, False]
        assert p["best_score"].tolist() == [0.4, 0.4, 0.6, 0.4]  # per split, valid only

    def test_snapshots_and_logs_in_order(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.5, 0.01, 0.4),
            b.log("seed evaluated"),
            b.snapshot([0], [0], 0, 0.4, generation=-1, n_evaluations=2, cost_usd_total=0.02, hypervolume=0.25),
            b.result(1, 0.7, 0.01, 0.6),
            b.log("generation 0 done", level="warning"),
            b.snapshot([0, 1], [1], 1, 0.6, generation=0, n_evaluations=4, cost_usd_total=0.05),
        ])  # fmt: skip
        s = store.snapshots("run-a")
        assert list(s.columns) == [
            "seq", "ts", "generation", "entries", "front", "best_idx", "best_score",
            "hypervolume", "n_evaluations", "cost_usd_total",
        ]  # fmt: skip
        assert s["generation"].tolist() == [-1, 0]
        assert s["entries"].tolist() == [[0], [0, 1]]
        assert s["front"].tolist() == [[0], [1]]
        assert s["best_idx"].tolist() == [0, 1]
        assert s["best_score"].tolist() == [0.4, 0.6]
        assert s["n_evaluations"].tolist() == [2, 4]
        assert s["cost_usd_total"].tolist() == [0.02, 0.05]
        assert s["hypervolume"].tolist()[0] == 0.25
        logs = store.logs("run-a")
        assert logs["message"].tolist() == ["seed evaluated", "generation 0 done"]
        assert logs["level"].tolist() == ["info", "warning"]
        assert logs["seq"].tolist() == [2, 5]

    # ---- proposals, approvals, topology versions ---------------------------------------------

    def test_proposals_and_approvals(self, store: RunStore) -> None:
        first = store.record_proposal(
            "gsm8k_replay", '{"kind": "pipeline"}', spec_hash="h1", run_id="run-a",
            candidate_idx=1, base_version=1, diff="- a\n+ b", proposed_by="cli", when=T0,
        )  # fmt: skip
        second = store.record_proposal("other", "{}", when=T0 + 1)
        assert (first, second) == (1, 2)
        pending = store.list_proposals()
        assert pending["proposal_id"].tolist() == [2, 1]
        assert pending["decision"].isna().tolist() == [True, True]
        when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
        a1 = store.record_approval(first, who="ana", when=when, comment="looks right",
                                   base_version=1, applied_version=2)  # fmt: skip
        a2 = store.record_approval(second, who="bo", decision="rejected", comment="too costly")
        assert (a1, a2) == (1, 2)
        mine = store.list_proposals("gsm8k_replay")
        assert list(mine.columns) == [
            "proposal_id", "target", "run_id", "candidate_idx", "spec_hash", "base_version",
            "proposed_by", "created_at", "decision", "who", "decided_at", "comment",
            "applied_version",
        ]  # fmt: skip
        row = mine.iloc[0]
        assert (row["proposal_id"], row["run_id"], row["candidate_idx"], row["spec_hash"]) == (
            1,
            "run-a",
            1,
            "h1",
        )
        assert (row["decision"], row["who"], row["comment"]) == ("approved", "ana", "looks right")
        assert (row["decided_at"], row["created_at"]) == (when.timestamp(), T0)
        assert (row["base_version"], row["applied_version"]) == (1, 2)
        assert store.list_proposals("other").iloc[0]["decision"] == "rejected"
        with pytest.raises(StoreError, match="no proposal 99"):
            store.record_approval(99, who="ana")
        with pytest.raises(StoreError):
            store.record_approval(first, who="")
        with pytest.raises(StoreError):
            store.record_approval(first, who="ana", decision="maybe")

    def test_a_proposal_shows_its_latest_decision_and_times(self, store: RunStore) -> None:
        import time

        pid = store.record_proposal("t", "{}", when=datetime(2024, 1, 2, 3, 4, 5))  # local
        assert store.list_proposals().iloc[0]["created_at"] == (
            datetime(2024, 1, 2, 3, 4, 5).timestamp()
        )
        store.record_approval(pid, who="ana", decision="rejected", comment="not yet", when=T0)
        before = time.time()
        store.record_approval(pid, who="bo", comment="now it is", applied_version=4)
        after = time.time()
        row = store.list_proposals("t").iloc[0]
        assert (row["decision"], row["who"], row["comment"], row["applied_version"]) == (
            "approved",
            "bo",
            "now it is",
            4,
        )
        assert before <= row["decided_at"] <= after

    def test_a_proposal_in_full_with_its_spec_and_diff(self, store: RunStore) -> None:
        spec = '{"kind": "pipeline", "id": "p1", "steps": []}'
        first = store.record_proposal(
            "gsm8k_replay", spec, spec_hash="h1", run_id="run-a", candidate_idx=3,
            base_version=2, diff="--- v2\n+++ proposal\n- a\n+ b\n", proposed_by="ana", when=T0,
        )  # fmt: skip
        second = store.record_proposal("editor/solver", "{}", when=T0 + 1)
        got = store.get_proposal("run-a", first)
        assert got.model_dump() == {
            "proposal_id": first, "target": "gsm8k_replay", "spec_json": spec, "spec_hash": "h1",
            "run_id": "run-a", "candidate_idx": 3, "base_version": 2,
            "diff": "--- v2\n+++ proposal\n- a\n+ b\n", "proposed_by": "ana", "created_at": T0,
            "decision": None, "who": None, "decided_at": None, "comment": None,
            "applied_version": None,
        }  # fmt: skip
        assert store.get_proposal(None, first) == got  # None: whatever run it is of
        other = store.get_proposal(None, second)
        assert (other.spec_json, other.diff, other.run_id, other.candidate_idx) == (
            "{}",
            "",
            None,
            None,
        )
        assert (other.spec_hash, other.base_version, other.proposed_by) == (None, None, "")
        # what list_proposals lists of it is the same
        listed = store.list_proposals().set_index("proposal_id").loc[first].to_dict()
        assert {k: listed[k] for k in ("target", "run_id", "candidate_idx", "spec_hash",
                                        "base_version", "proposed_by", "created_at")} == {
            k: getattr(got, k) for k in ("target", "run_id", "candidate_idx", "spec_hash",
                                         "base_version", "proposed_by", "created_at")
        }  # fmt: skip
        # its latest decision
        store.record_approval(first, who="bo", decision="rejected", comment="no", when=T0 + 5)
        store.record_approval(first, who="cy", comment="yes", applied_version=3, when=T0 + 9)
        decided = store.get_proposal("run-a", first)
        assert (decided.decision, decided.who, decided.decided_at, decided.comment) == (
            "approved",
            "cy",
            T0 + 9,
            "yes",
        )
        assert decided.applied_version == 3
        assert decided.spec_json == spec
        with pytest.raises(pydantic.ValidationError):  # a frozen record
            decided.decision = "rejected"  # type: ignore[misc]

    def test_a_missing_proposal_is_a_store_error_naming_it(self, store: RunStore) -> None:
        with pytest.raises(StoreError, match=r"^no proposal 1$"):
            store.get_proposal(None, 1)
        pid = store.record_proposal("t", "{}", run_id="run-a")
        with pytest.raises(StoreError, match=r"^no proposal 7 of run 'run-a'$"):
            store.get_proposal("run-a", 7)
        with pytest.raises(StoreError, match=rf"^no proposal {pid} of run 'run-b' \(proposal "
                           rf"{pid} is of run 'run-a'\)$"):  # fmt: skip
            store.get_proposal("run-b", pid)
        outside = store.record_proposal("t", "{}")
        with pytest.raises(StoreError, match=rf"no proposal {outside} of run 'run-a'.*no run"):
            store.get_proposal("run-a", outside)

    def test_snapshot_membership_of_archive_entries(self, store: RunStore) -> None:
        b = RunBuilder()
        store.record_events([
            b.started(),
            b.result(0, 0.5, 0.01, 0.45), b.result(1, 0.6, 0.01, 0.55),
            b.snapshot([0], [0], 0, 0.45),
            b.result(2, 0.7, 0.02, 0.65),
            b.snapshot([0, 1], [1], 1, 0.55),  # the latest snapshot counts
        ])  # fmt: skip
        arch = store.archive("run-a")
        assert arch["in_snapshot"].tolist() == [True, True, False]
        assert arch["snapshot_front"].tolist() == [False, True, False]

    def test_topology_versions_for_rollback(self, store: RunStore) -> None:
        with pytest.raises(StoreError, match="no any version"):
            store.get_topology_version("t")
        assert store.save_topology_version("t", '{"v": 1}', spec_hash="h1", note="initial") == 1
        assert store.save_topology_version("t", '{"v": 2}') == 2
        assert store.save_topology_version("u", '{"u": 1}') == 1
        assert store.save_topology_version("t", '{"v": 1}', note="rollback to 1") == 3
        latest = store.get_topology_version("t")
        assert (latest.version, latest.spec_json, latest.note) == (3, '{"v": 1}', "rollback to 1")
        v1 = store.get_topology_version("t", 1)
        assert (v1.target, v1.spec_json, v1.spec_hash, v1.note) == (
            "t",
            '{"v": 1}',
            "h1",
            "initial",
        )
        listed = store.list_topology_versions("t")
        assert list(listed.columns) == ["version", "spec_hash", "created_at", "note"]
        assert listed["version"].tolist() == [1, 2, 3]
        with pytest.raises(StoreError, match=r"saved versions: \[1, 2, 3\]"):
            store.get_topology_version("t", 7)
        with pytest.raises(StoreError, match="JSON"):
            store.save_topology_version("t", "not json")

    # ---- skipped journal lines ----------------------------------------------------------------

    def test_a_store_without_skipped_lines_lists_none(self, store: RunStore) -> None:
        assert store.list_ingest_errors() == []
        store.record_events(small_run())
        store.ingest()
        assert store.list_ingest_errors() == []
        assert store.list_ingest_errors("run-a") == []

    def test_skipped_journal_lines_are_listed_once_with_where_and_why(
        self, store: RunStore, tmp_path: Path
    ) -> None:
        import json
        import time

        folder = self.journals(tmp_path)
        if folder is None:
            assert store.list_ingest_errors() == []
            return
        folder.mkdir(parents=True, exist_ok=True)
        good = [encode_event(e) + b"\n" for e in small_run()]
        nan_ts = json.loads(good[2])
        nan_ts["ts"] = math.nan  # as an older version could write it
        bad = [b"not json\n", json.dumps(nan_ts).encode() + b"\n"]
        stray = encode_event(RunBuilder("run-c").started()) + b"\n"
        path_a = folder / "run-a.jsonl"
        path_a.write_bytes(b"".join(good[:2]) + b"".join(bad) + b"".join(good[2:]) + stray)
        idx = json.loads(encode_event(RunBuilder("run-b").proposed(0)))
        idx["candidate_idx"] = 2**31
        line_b = json.dumps(idx).encode() + b"\n"
        (folder / "run-b.jsonl").write_bytes(b"\n" + line_b)
        before = time.time()
        report = store.ingest()
        after = time.time()
        assert (report.n_events, report.skipped_lines) == (11, 4)
        errors = store.list_ingest_errors()
        where = [(e.run_id, e.journal, e.line_no, e.byte_offset) for e in errors]
        at = len(good[0]) + len(good[1])
        assert where == [
            ("run-a", str(path_a), 3, at),
            ("run-a", str(path_a), 4, at + len(bad[0])),
            ("run-a", str(path_a), 14, path_a.stat().st_size - len(stray)),
            ("run-b", str(folder / "run-b.jsonl"), 2, 1),
        ]
        assert (
            [e.line_head for e in errors]
            == [  # the line's first 200 characters
                line.rstrip(b"\n")[:200].decode() for line in (*bad, stray, line_b)
            ]
        )
        assert "'ts'" in errors[1].error and "finite" in errors[1].error
        assert "run-c" in errors[2].error
        assert "candidate_idx" in errors[3].error and "2147483647" in errors[3].error
        assert all(before <= e.recorded_at <= after for e in errors)
        assert store.list_ingest_errors("run-b") == errors[3:]
        assert store.list_ingest_errors("run-c") == []
        # the journal cut back and written again: read again from the start, listed once
        path_a.write_bytes(good[0])
        store.ingest()
        path_a.write_bytes(b"".join(good[:2]) + b"".join(bad) + b"".join(good[2:]) + stray)
        assert store.ingest().n_events == 0
        assert store.list_ingest_errors() == errors

    # ---- lifecycle and threads ---------------------------------------------------------------

    def test_a_closed_store_refuses_calls(self, tmp_path: Path) -> None:
        s = self.make_store(tmp_path)
        s.close()
        s.close()  # idempotent
        with pytest.raises(StoreError, match="closed"):
            s.list_runs()
        with pytest.raises(StoreError, match="closed"):
            s.record_events(small_run())

    def test_context_manager_closes(self, tmp_path: Path) -> None:
        with self.make_store(tmp_path) as s:
            s.record_events(small_run())
        with pytest.raises(StoreError):
            s.get_run("run-a")

    def test_one_store_from_eight_threads(self, store: RunStore) -> None:
        """F9: the cached store used from 8 threads, 50 writes and 50 reads each."""
        errors: list[BaseException] = []
        start = threading.Barrier(8)

        def work(t: int) -> None:
            try:
                start.wait()
                for i in range(50):
                    if i % 2 == 0:  # a run with one candidate and one result
                        b = RunBuilder(f"t{t}-r{i}", t0=T0 + t * 1000 + i)
                        store.record_events([b.started(), b.proposed(0), b.example(0, "e1", 1.0)])
                        run = store.get_run(f"t{t}-r{i}")
                        assert run is not None and run.n_events == 3
                        examples = store.candidate_examples(f"t{t}-r{i}", 0)
                        assert examples["example_id"].tolist() == ["e1"]
                    else:  # a topology version of one target all threads share
                        version = store.save_topology_version("shared", f'{{"t": {t}, "i": {i}}}')
                        got = store.get_topology_version("shared", version)
                        assert got.spec_json == f'{{"t": {t}, "i": {i}}}'
            except BaseException as exc:  # collected and reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        runs = store.list_runs()
        assert len(runs) == 200
        assert int(runs["n_events"].sum()) == 600
        assert int(runs["n_evaluations"].sum()) == 200
        assert store.list_topology_versions("shared")["version"].tolist() == list(range(1, 201))
