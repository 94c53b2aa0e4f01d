"""Pure view builders over store DataFrames: runs, archive sort/filter, inspector, compare,
diff, deep links and the progress frame."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from core.ir import parse_topology
from core.storage import DuckDBRunStore
from studio.views.candidate import candidate_view, parse_stored_spec
from studio.views.compare import compare_metrics, flip_counts, flipped_examples, parse_item
from studio.views.diffs import diff_view
from studio.views.links import LiveLink, parse_live_link
from studio.views.pareto import progress_frame
from studio.views.tables import (
    archive_table,
    candidate_options,
    format_time,
    live_status,
    run_label,
    runs_table,
)

RUN = "20250101-120000-abc123"


@pytest.fixture
def store(small_db: Path):  # noqa: ANN201
    with DuckDBRunStore(small_db) as s:
        yield s


def test_runs_table_and_label(store: DuckDBRunStore) -> None:
    runs = store.list_runs()
    table = runs_table(runs)
    assert table["run_id"].tolist() == [RUN]
    assert table["started"].tolist() == ["2025-01-01 12:00:00 UTC"]
    assert run_label(runs.iloc[0]) == f"{RUN}  gsm8k_replay  evolutionary  (completed)"
    assert runs_table(runs.iloc[0:0]).empty
    assert format_time(None) == "" and format_time(math.nan) == ""


def test_archive_table_sorts_filters_and_puts_nan_last(store: DuckDBRunStore) -> None:
    archive = store.archive(RUN, include_unevaluated=True)
    assert archive_table(archive)["candidate_idx"].tolist() == [1, 0, 2, 3]
    assert archive_table(archive, descending=False)["candidate_idx"].tolist() == [2, 0, 1, 3]
    assert archive_table(archive, sort_by="cost_usd")["candidate_idx"].tolist() == [1, 3, 2, 0]
    assert archive_table(archive, only_front=True)["candidate_idx"].tolist() == [1, 0]
    assert archive_table(archive, only_valid=True)["candidate_idx"].tolist() == [1, 0, 2]
    assert archive_table(archive, text="STRONGEST")["candidate_idx"].tolist() == [1]
    assert archive_table(archive, text="nan_acc")["candidate_idx"].tolist() == [3]
    with pytest.raises(ValueError, match="cannot sort by 'nope'"):
        archive_table(archive, sort_by="nope")
    assert candidate_options(archive) == [1, 0, 2, 3]
    assert candidate_options(archive, valid_only=True) == [1, 0, 2]


def test_candidate_view_has_thought_status_metrics_and_graph(store: DuckDBRunStore) -> None:
    archive = store.archive(RUN)
    row = archive.loc[archive["candidate_idx"] == 1].iloc[0]
    view = candidate_view(
        row, store.get_spec(str(row["spec_hash"])), store.candidate_examples(RUN, 1)
    )
    assert view.title == "candidate 1 (generation 0, mutate:change_agent of 0)"
    assert (
        view.status == "on the Pareto front, best aggregate score; scored on the validation split"
    )
    assert view.thought == "Use the strongest run: accuracy matters most here."
    assert view.metrics["accuracy"] == 0.6
    assert view.dot.startswith("digraph topology {")
    assert view.examples["example_id"].tolist() == ["q1", "q2", "q3", "q4"]
    bad = archive.loc[archive["candidate_idx"] == 3].iloc[0]
    assert candidate_view(bad, None).status == "not valid: nan_accuracy"
    assert candidate_view(bad, None).spec_problem == "no spec stored for this candidate"
    assert parse_stored_spec("not json")[0] is None


def test_compare_metrics_and_flips(store: DuckDBRunStore) -> None:
    archive = store.archive(RUN)
    rows = [archive.iloc[i].to_dict() for i in (0, 1)]
    table = compare_metrics(rows, ["a", "b"])
    assert table.loc["accuracy"].tolist() == ["25.00%", "60.00%"]
    assert table.loc["on_front"].tolist() == ["yes", "yes"]
    with pytest.raises(ValueError, match="labels must be unique"):
        compare_metrics(rows, ["a", "a"])
    flips = store.compare_candidates(RUN, 1, 0)
    assert flip_counts(flips) == {
        "right_to_wrong": 2,
        "wrong_to_right": 0,
        "both_right": 1,
        "both_wrong": 1,
        "only_a": 0,
        "only_b": 0,
    }
    assert flipped_examples(flips)["example_id"].tolist() == ["q2", "q3"]
    assert flipped_examples(flips, include_same=True)["change"].tolist() == [
        "right_to_wrong",
        "right_to_wrong",
        "both_right",
        "both_wrong",
    ]
    assert parse_item(f"{RUN}:7") == (RUN, 7)
    with pytest.raises(ValueError, match="expected RUN:CANDIDATE"):
        parse_item("7")


def test_diff_view_colours_and_counts() -> None:
    before = parse_topology(
        '{"kind": "pipeline", "id": "p", "steps": [{"operation": {"kind": "agent_step", "id": "a",'
        ' "agent_name": "x"}}, {"operation": {"kind": "function_step", "id": "f", "callable_name": "g"}}]}'
    )
    after = parse_topology(
        '{"kind": "pipeline", "id": "p", "steps": [{"operation": {"kind": "agent_step", "id": "a",'
        ' "agent_name": "y"}}, {"operation": {"kind": "agent_step", "id": "n", "agent_name": "z"}}]}'
    )
    view = diff_view(before, after)
    assert view.changes[["change", "node_id"]].values.tolist() == [
        ["changed", "p"],
        ["changed", "a"],
        ["added", "n"],
        ["removed", "f"],
    ]
    assert view.counts == {"added": 1, "removed": 1, "changed": 2}
    assert '"#2ca02c"' in view.after_dot and '"#d62728"' in view.before_dot
    assert view.unified.startswith("--- current\n+++ proposed\n")
    new = diff_view(None, after)
    assert new.before_dot == "" and new.counts["added"] == 3
    same = diff_view(after, after)
    assert not same.changed and same.changes.empty


def test_live_links_drop_what_they_do_not_know() -> None:
    link = parse_live_link(
        {"run": "r1", "candidate": "7", "x": "latency_ms", "y": "bogus"},
        runs=["r1"],
        objectives=["accuracy", "latency_ms"],
    )
    assert link == LiveLink(run="r1", candidate=7, x="latency_ms", y=None)
    assert link.to_params() == {"run": "r1", "candidate": "7", "x": "latency_ms"}
    assert parse_live_link({"run": "zz", "candidate": "x"}, runs=["r1"]) == LiveLink()
    assert parse_live_link({"run": ["r1"]}, runs=[]).run == "r1"


def test_progress_frame_prefers_snapshots(store: DuckDBRunStore) -> None:
    frame = progress_frame(store.snapshots(RUN), store.progress(RUN))
    assert frame["n_evaluations"].tolist() == [4, 8, 12, 16]
    assert frame["best_score"].tolist() == [0.2, 0.45, 0.45, 0.45]
    assert frame["hypervolume"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    from_progress = progress_frame(store.snapshots(RUN).iloc[0:0], store.progress(RUN))
    assert from_progress["n_evaluations"].tolist() == [4, 8, 12, 16]
    assert from_progress["best_score"].tolist() == [0.2, 0.45, 0.45, 0.45]
    assert progress_frame(pd.DataFrame()).empty


def test_proposal_labels_order_and_history() -> None:
    from core.search.registry import Approval, VersionRecord
    from studio.views.diffs import history_table, proposal_label, proposal_order

    rows = [
        {"proposal_id": 1, "target": "/reg/solver", "decision": "approved", "run_id": None,
         "candidate_idx": None, "proposed_by": "ann"},
        {"proposal_id": 2, "target": "/reg/solver", "decision": None, "run_id": RUN,
         "candidate_idx": 7, "proposed_by": "bob"},
        {"proposal_id": 3, "target": "/reg/other", "decision": float("nan"), "run_id": None,
         "candidate_idx": None, "proposed_by": "cy"},
    ]  # fmt: skip
    assert proposal_order(rows) == [3, 2, 1]
    assert proposal_label(rows[1], "/reg/") == f"#2 solver (pending, from run {RUN} #7, by bob)"
    assert proposal_label(rows[0], "/reg/") == "#1 solver (approved, from editor, by ann)"
    records = [
        VersionRecord(name="s", version=1, spec_hash="h1", created_at="t1", base_version=None),
        VersionRecord(
            name="s", version=2, spec_hash="h2", created_at="t2", base_version=1,
            approval=Approval(by="ann", at="t2", comment="ok"), note="proposal 1",
        ),
    ]  # fmt: skip
    table = history_table(records)
    assert table["version"].tolist() == [2, 1]
    assert table["created_at"].tolist() == ["t2", "t1"]
    assert table["comment"].tolist() == ["ok", ""]
    assert table["note"].tolist() == ["proposal 1", ""]
    assert table["approved_by"].tolist() == ["ann", ""]


def test_live_status_shows_the_studio_pause_like_the_runs_page() -> None:
    t = 1_735_776_009.0  # 2025-01-02 00:00:09 UTC
    assert live_status("running", None, t) == "running, data as of 2025-01-02 00:00:09 UTC"
    assert live_status("running", None, t, "running") == (
        "running, data as of 2025-01-02 00:00:09 UTC"
    )
    assert live_status("running", None, t, "paused") == "paused, data as of 2025-01-02 00:00:09 UTC"
    assert live_status("running", None, None, "stopping") == "stopping, data as of no events yet"
    # the store's final word wins over a stale in-process state
    assert live_status("stopped", "stopped from the studio", t, "paused") == (
        "stopped: stopped from the studio"
    )
    assert live_status("completed", None, t, "finished") == "completed"
