"""Editor evaluations are first-class: stored in the run store as a run of their own (so Live and
Compare show them), compared with the candidate they were edited from on the same examples, and the
cost estimate calibrated against measured costs of the same agents.

The figures are gsm8k_replay's recorded runs of its first validation examples (ids
gsm8k-test-0003, -0006, -0031, -0042, -0043):

| example | 6b_finetuning: right, USD, ms | 175b_verification: right, USD, ms |
| 0003    | 0, 0.000354,  560             | 1, 0.648, 2300                    |
| 0006    | 0, 0.000708, 1420             | 1, 1.500, 7800                    |
| 0031    | 0, 0.000948, 1960             | 0, 1.824, 9200                    |
| 0042    | 1, 0.000984, 1560             | 1, 1.848, 6800                    |
| 0043    | 0, 0.001284, 3180             | 0, 1.572, 7600                    |
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.ir import parse_topology, spec_hash
from studio.manager import StudioManager

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
EDITOR = str(REPO / "pages" / "editor.py")

SMALL = (
    '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "6b_finetuning"}}]}'
)
BIG = SMALL.replace("6b_finetuning", "175b_verification")

PARENT_TABLE = {
    # 1 of 5 right against 3 of 5; means over the five paired examples only (the parent was
    # scored on eight)
    "parent": ["20.00%", "$0.0009", "1.74 s"],
    "this topology": ["60.00%", "$1.4784", "6.74 s"],
    "change": ["+40.00 pp", "+$1.4775", "+5,004 ms"],
}


@pytest.fixture
def parent_run(studio_env: Path) -> str:
    """An editor run of the 6b_finetuning topology on the first 8 validation examples."""
    manager = StudioManager(studio_env, registry_root=studio_env.parent / "registry")
    try:
        spec = parse_topology(SMALL)
        ev = manager.evaluate("gsm8k_replay", spec, limit=8)
        return manager.record_evaluation("gsm8k_replay", spec, ev, source="test", now=1.8e9)
    finally:
        manager.close()


@pytest.fixture
def editor(parent_run: str, studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(EDITOR)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _evaluate(at: AppTest, limit: int) -> AppTest:
    at.number_input(key="ed_limit").set_value(limit).run()
    at.button(key="ed_eval").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption])


def _store_runs(db: Path) -> list[dict[str, object]]:
    manager = StudioManager(db, registry_root=db.parent / "registry")
    try:
        runs = manager.store.list_runs()
        out = []
        for run_id in runs["run_id"].tolist():
            record = manager.store.get_run(str(run_id))
            assert record is not None
            archive = manager.store.archive(str(run_id))
            out.append(
                {
                    "run_id": str(run_id),
                    "strategy": record.strategy,
                    "parent": manager.editor_parent(str(run_id)),
                    "accuracy": archive["accuracy"].tolist(),
                    "n_examples": archive["n_examples"].tolist(),
                }
            )
        return out
    finally:
        manager.close()


def test_an_evaluation_from_the_inspector_is_stored_and_compared_with_its_candidate(
    editor: AppTest, parent_run: str, studio_env: Path
) -> None:
    at = editor
    at.session_state["editor_incoming"] = {
        "spec_json": BIG,
        "source": f"run {parent_run} candidate 0",
        "parent": [parent_run, 0],
    }
    at.run()
    at = _evaluate(at, 5)
    new_run = at.session_state["ed_eval_run"]
    assert new_run not in (None, parent_run)
    # stored: a completed run of its own, candidate 0 with the evaluation's figures
    stored = {r["run_id"]: r for r in _store_runs(studio_env)}
    assert stored[new_run] == {
        "run_id": new_run,
        "strategy": "editor",
        "parent": (parent_run, 0),
        "accuracy": [0.6],
        "n_examples": [5],
    }
    assert stored[parent_run]["n_examples"] == [8]
    # compared with the parent on the five examples both were scored on
    [table] = [d.value for d in at.dataframe if list(d.value.columns) == list(PARENT_TABLE)]
    assert table.to_dict("list") == PARENT_TABLE
    assert table.index.tolist() == ["accuracy", "cost_usd", "latency_ms"]
    text = _text(at)
    assert f"**Compared with its parent, run {parent_run} candidate 0**" in text
    assert (
        "On the 5 validation examples both were scored on: the parent's figures are taken on "
        "the same examples."
    ) in text
    assert (
        "2 wrong to right, 0 right to wrong, 1 both right, 2 both wrong. McNemar exact test on "
        "5 paired examples: this topology is right on 2 more of the 2 examples where they "
        "differ; two-sided p = 0.5, not enough to call either better (p >= 0.05)."
    ) in text
    # the cost panel was drawn again with the stored run: this topology is measured now
    assert (
        f"**Measured cost per example: $1.48** (mean over 5 validation examples, run {new_run} "
        "candidate 0)."
    ) in text
    links = {str(p.label): p for p in at.get("page_link")}
    assert f"Stored as run {new_run}" in links
    assert "Compare with the parent" in links


def test_a_loaded_topology_finds_its_parent_by_hash_after_an_edit(
    editor: AppTest, parent_run: str
) -> None:
    at = editor
    # loaded without a candidate (as the seed or a registry version is): its hash is looked up
    at.session_state["editor_incoming"] = {"spec_json": SMALL, "source": "a test"}
    at.run()
    at.text_area(key="ed_json").set_value(json.dumps(json.loads(BIG), indent=2)).run()
    assert spec_hash(parse_topology(at.session_state["ed_spec"])) == spec_hash(parse_topology(BIG))
    at = _evaluate(at, 5)
    assert at.session_state["ed_eval_parent"] == (parent_run, 0)
    [table] = [d.value for d in at.dataframe if list(d.value.columns) == list(PARENT_TABLE)]
    assert table.to_dict("list") == PARENT_TABLE


def test_an_evaluation_with_no_measured_origin_says_it_is_not_compared(
    editor: AppTest, studio_env: Path
) -> None:
    at = _evaluate(editor, 3)  # the problem's seed (175b_finetuning): no run measured it
    assert at.session_state["ed_eval_parent"] is None
    assert (
        "Not compared: the working copy was not loaded from a candidate a run measured."
        in _text(at)
    )
    stored = [r for r in _store_runs(studio_env) if r["run_id"] == at.session_state["ed_eval_run"]]
    assert [(r["strategy"], r["parent"], r["n_examples"]) for r in stored] == [
        ("editor", None, [3])
    ]


def test_the_stored_evaluation_calibrates_the_next_estimate(editor: AppTest) -> None:
    at = editor
    at.session_state["editor_incoming"] = {"spec_json": SMALL, "source": "a test"}
    at.run()
    # the small store measured 6b_finetuning alone three times: candidates 0 ($0.001) and 2
    # (with a function step, $0.002) of the search, and the parent run ($0.00088275 over 8);
    # all three have the same static estimate, so the median ratio gives back $0.0010
    text = _text(at)
    assert "**Measured cost per example: $0.000883** (mean over 8 validation examples" in text
    assert "Calibrated estimate: $0.0010 per example" in text
    assert "the median measured / static ratio of 3 topologies using only these agents" in text


def test_the_stored_evaluation_reads_as_an_editor_candidate_in_the_inspector(
    parent_run: str, studio_env: Path
) -> None:
    from studio.views.candidate import candidate_view

    manager = StudioManager(studio_env, registry_root=studio_env.parent / "registry")
    try:
        archive = manager.store.archive(parent_run)
        row = archive.iloc[0]
        # no parent candidate in its own run: parent_idx is pd.NA, which once raised TypeError
        view = candidate_view(row, manager.store.get_spec(str(row["spec_hash"])))
    finally:
        manager.close()
    assert view.title == "candidate 0 (generation 0, editor)"
    assert view.thought == "test"
    assert view.metrics["accuracy"] == 0.25  # 2 of the first 8 right (0042, 0048)


def test_compare_opens_the_evaluation_beside_its_parent_and_says_the_samples_differ(
    editor: AppTest, parent_run: str
) -> None:
    at = editor
    at.session_state["editor_incoming"] = {
        "spec_json": BIG,
        "source": "inspector",
        "parent": [parent_run, 0],
    }
    at.run()
    at = _evaluate(at, 5)
    new_run = at.session_state["ed_eval_run"]
    at.query_params["items"] = f"{parent_run}:0,{new_run}:0"
    at.switch_page(str(REPO / "pages" / "compare.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [f"1: #0 ({parent_run[-6:]})", f"2: #0 ({new_run[-6:]})"]
    assert [str(w.value) for w in at.warning] == [
        f"These figures rest on different examples ({labels[0]} on 8 validation, {labels[1]} "
        "on 5 validation): their differences mix the topologies with the problems drawn. The "
        "flips below compare the examples both were scored on."
    ]
    counts = {str(m.label): m.value for m in at.metric}
    assert counts == {
        # both are candidate 0 of their run: the tiles name them A and B
        "right in A (#0), wrong in B (#0)": "0",
        "wrong in A (#0), right in B (#0)": "2",
        "both right": "1",
        "both wrong": "2",
    }


def test_a_reloaded_draft_still_compares_with_the_candidate_it_came_from(
    editor: AppTest, parent_run: str
) -> None:
    at = editor
    at.session_state["editor_incoming"] = {
        "spec_json": BIG,
        "source": "inspector",
        "parent": [parent_run, 0],
    }
    at.run()
    draft = at.query_params["draft"]
    # a reload is a new session with the same URL
    again = AppTest.from_file(APP, default_timeout=120)
    again.run()
    again.switch_page(EDITOR)
    again.query_params["draft"] = draft
    again.run()
    assert not again.exception, [e.value for e in again.exception]
    again = _evaluate(again, 5)
    assert again.session_state["ed_eval_parent"] == (parent_run, 0)
    [table] = [d.value for d in again.dataframe if list(d.value.columns) == list(PARENT_TABLE)]
    assert table.to_dict("list") == PARENT_TABLE
