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
    full_split,
    live_status,
    run_label,
    runs_table,
    scored_on,
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


def test_runs_table_shows_the_designers_tokens_beside_its_cost(tmp_path: Path) -> None:
    """The designer's own cost and tokens, summed over the run's proposals; a runs frame from
    before tokens were recorded shows none."""
    from core.vocab.events import CandidateProposed, RunStarted

    head = {"run_id": "m1", "ts": 1_735_732_800.0}
    with DuckDBRunStore(tmp_path / "runs.duckdb") as store:
        store.record_events([
            RunStarted(**head, seq=0, problem="p", strategy="meta_agent", seed=1),
            CandidateProposed(**head, seq=1, candidate_idx=0, generation=-1, spec_hash="h0",
                              spec_json="{}"),
            CandidateProposed(**head, seq=2, candidate_idx=1, generation=0, spec_hash="h1",
                              spec_json="{}", design_cost_usd=0.000549, design_requests=3,
                              design_input_tokens=2700, design_output_tokens=240),
        ])  # fmt: skip
        runs = store.list_runs()
    row = runs_table(runs).iloc[0]
    assert row["design_cost_usd"] == pytest.approx(0.000549, abs=1e-12)
    assert (row["design_input_tokens"], row["design_output_tokens"]) == (2700, 240)
    old = runs_table(runs.drop(columns=["design_input_tokens", "design_output_tokens"]))
    assert old[["design_input_tokens", "design_output_tokens"]].iloc[0].tolist() == [0, 0]


def test_archive_table_sorts_filters_and_puts_nan_last(store: DuckDBRunStore) -> None:
    archive = store.archive(RUN, include_unevaluated=True)
    assert archive_table(archive)["candidate_idx"].tolist() == [1, 0, 2, 3]
    assert archive_table(archive, descending=False)["candidate_idx"].tolist() == [2, 0, 1, 3]
    # invalid 3 is not scored on the full split: after the others when ranking by a score
    assert archive_table(archive, sort_by="cost_usd")["candidate_idx"].tolist() == [1, 2, 0, 3]
    assert archive_table(archive, sort_by="candidate_idx")["candidate_idx"].tolist() == [3, 2, 1, 0]
    assert archive_table(archive)["scored_on"].tolist() == ["validation (4)"] * 3 + [
        "validation (4)"
    ]
    assert "objective_split" not in archive_table(archive).columns
    # the key figures first, in view at 1000 px (a narrow window still shows them)
    assert list(archive_table(archive).columns)[:8] == [
        "candidate_idx", "accuracy", "cost_usd", "aggregate_score", "scored_on", "on_front",
        "is_best", "latency_ms",
    ]  # fmt: skip
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
        view.status
        == "on the Pareto front, best aggregate score; scored on 4 problems of the validation split"
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
    assert view.counts == {"added": 1, "removed": 1, "changed": 2, "moved": 0}
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


def _mixed_archive() -> pd.DataFrame:
    """The reviewer's case: the seed at 0.3223 on 300 problems, a mutant at 0.45 on 20."""
    return pd.DataFrame(
        {
            "candidate_idx": [0, 1, 2, 3],
            "operator": ["seed", "mutate", "mutate", "mutate"],
            "on_front": [True, False, False, False],
            "valid": [True, True, True, False],
            "comparable": [True, False, True, False],
            "aggregate_score": [0.3223, 0.45, 0.21, float("nan")],
            "accuracy": [0.33, 0.45, 0.22, float("nan")],
            "objective_split": ["validation", "minibatch", "validation", "minibatch"],
            "n_examples": [300, 20, 300, 20],
        }
    )


def test_archive_ranks_full_split_scores_above_minibatch_estimates() -> None:
    archive = _mixed_archive()
    table = archive_table(archive)
    assert table["candidate_idx"].tolist() == [0, 2, 1, 3]
    assert table["scored_on"].tolist() == [
        "validation (300)",
        "validation (300)",
        "minibatch (20)",
        "minibatch (20)",
    ]
    asc = archive_table(archive, descending=False)
    assert asc["candidate_idx"].tolist() == [2, 0, 1, 3]
    # sorting by number or generation is not a ranking: no grouping
    assert archive_table(archive, sort_by="candidate_idx")["candidate_idx"].tolist() == [3, 2, 1, 0]
    assert candidate_options(archive) == [0, 2, 1, 3]
    # the store's archive has no comparable column: derived from valid and the split
    assert full_split(archive.drop(columns="comparable")).tolist() == [True, False, True, False]
    assert archive_table(archive.drop(columns="comparable"))["candidate_idx"].tolist() == [
        0,
        2,
        1,
        3,
    ]
    # only minibatch results so far: those are the most complete split
    early = archive.assign(objective_split="minibatch").drop(columns="comparable")
    assert full_split(early).tolist() == [True, True, True, False]
    # without a split column every valid row counts
    plain = archive.drop(columns=["comparable", "objective_split"])
    assert full_split(plain).tolist() == [True, True, True, False]
    assert archive_table(plain)["candidate_idx"].tolist() == [1, 0, 2, 3]


def test_scored_on_names_split_and_size() -> None:
    assert scored_on("minibatch", 20) == "minibatch (20)"
    assert scored_on("validation", 300.0) == "validation (300)"
    assert scored_on("validation", None) == "validation"
    assert scored_on(None, 20) == "" and scored_on(math.nan, math.nan) == ""


def test_candidate_view_says_a_minibatch_score_is_an_estimate() -> None:
    row = _mixed_archive().iloc[1]
    view = candidate_view(row, None)
    assert view.status == (
        "minibatch estimate: scored on 20 problems of the minibatch split only, "
        "not ranked with full-split scores"
    )


def test_the_archive_filter_matches_agent_names_and_values() -> None:
    # the bug this pins: the filter could not match agent names or values
    from studio.views.tables import archive_table

    arch = pd.DataFrame(
        {
            "candidate_idx": [0, 1], "generation": [0, 0], "operator": ["seed", "mutate"],
            "thought": ["", ""], "invalid_reason": [None, None], "spec_hash": ["h0", "h1"],
            "accuracy": [0.575, 0.25], "cost_usd": [0.7269, 0.001], "latency_ms": [10.0, 20.0],
            "aggregate_score": [0.4, 0.1], "valid": [True, True], "on_front": [True, False],
            "objective_split": ["validation"] * 2, "n_examples": [40, 40],
        }
    )  # fmt: skip
    from studio.views.tables import names_in_spec

    texts = {
        "h0": names_in_spec(
            '{"kind": "pipeline", "name": "seed", "agent_name": "175b_verification"}'
        ),
        "h1": names_in_spec('{"agent_name": "6b_finetuning", "callable_name": "keep"}'),
    }
    assert texts["h1"] == "6b_finetuning keep"
    pick = lambda t: archive_table(arch, text=t, spec_names=texts)["candidate_idx"].tolist()  # noqa: E731
    assert pick("pipeline") == []  # structure words are not names
    assert pick("175B_VERIF") == [0]
    assert pick("6b_fine") == [1]
    assert pick("0.575") == [0]
    assert pick("0.001") == [1]


def test_the_filter_finds_a_figure_by_its_full_value_or_as_the_table_shows_it() -> None:
    # `0.54` finds the candidates with that figure
    from studio.views.tables import archive_table

    arch = pd.DataFrame(
        {
            "candidate_idx": [0, 1, 2], "generation": [0, 0, 0],
            "operator": ["seed", "mutate", "mutate"], "thought": ["", "", ""],
            "invalid_reason": [None, None, "nan_accuracy"], "spec_hash": ["h0", "h1", "h2"],
            "accuracy": [0.5416666666666666, 0.55, float("nan")],
            "cost_usd": [0.5, 0.001234, 0.2], "latency_ms": [5480.6, 20.0, 30.0],
            "aggregate_score": [0.4, 0.1, float("nan")], "valid": [True, True, False],
            "on_front": [True, False, False], "objective_split": ["validation"] * 3,
            "n_examples": [40, 40, 40],
        }
    )  # fmt: skip
    pick = lambda t: archive_table(arch, text=t)["candidate_idx"].tolist()  # noqa: E731
    assert pick("0.54") == [0]  # 0.5416...: the full value
    assert pick("0.542") == [0]  # as shown (%.3f)
    assert pick("0.55") == [1]
    assert pick("0.50000") == [0]  # cost as shown (%.5f); its full value is 0.5
    assert pick("0.00123") == [1]
    assert pick("5481") == [0]  # latency as shown (%.0f); its full value is 5480.6
    assert pick("0.4000") == [0]  # score as shown (%.4f)
    assert pick("nan") == [2]  # its reason; a missing figure is no text


def test_split_editor_runs_leaves_out_the_editors_evaluations_and_counts_them() -> None:
    import pandas as pd

    from studio.views.tables import EDITOR_STRATEGY, split_editor_runs

    runs = pd.DataFrame(
        {"run_id": ["e1", "s1", "e2", "s2"], "strategy": ["editor", "random", "editor", "gepa"]}
    )
    kept, n = split_editor_runs(runs)
    assert EDITOR_STRATEGY == "editor"
    assert (kept["run_id"].tolist(), kept.index.tolist(), n) == (["s1", "s2"], [0, 1], 2)
    kept, n = split_editor_runs(runs.iloc[0:0])
    assert (kept.empty, list(kept.columns), n) == (True, ["run_id", "strategy"], 0)


def test_fold_phases_lists_phase_2_under_its_search() -> None:
    """One run, two phases (`studio.views.phases`): phase 2 right under its search (its older
    phase 2 left out), a phase 2 whose search is not listed on its own."""
    from studio.views.phases import fold_phases, phase_two_of, search_of

    runs = pd.DataFrame(
        {
            "run_id": ["p2b", "lone", "s2", "p2a", "s1"],
            "parent_run_id": ["s1", "gone", None, "s1", None],
        }
    )
    folded = fold_phases(runs)
    assert folded["run_id"].tolist() == ["lone", "s2", "s1", "p2b"]
    assert folded["phase"].tolist() == ["2 prompts", "", "1 topology", "2 prompts"]
    assert phase_two_of(runs) == {"s1": "p2b"}
    assert (search_of(runs, "p2a"), search_of(runs, "lone"), search_of(runs, "s1")) == (
        "s1",
        None,
        None,
    )
    assert fold_phases(runs.iloc[0:0])["phase"].tolist() == []
