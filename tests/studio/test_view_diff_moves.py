"""The diff sees moved nodes (matched by id alone, a moved node was neither listed nor coloured):
by id when the node kept it, by content when
its auto-assigned id changed; a sibling that only shifted is no move."""

from __future__ import annotations

from core.ir import parse_topology
from studio.views.diffs import diff_view, is_rollback, proposal_label

V = {"kind": "agent_step", "id": "v", "agent_name": "6b_verification"}
F = {"kind": "agent_step", "id": "f", "agent_name": "6b_finetuning"}
BEFORE = {
    "kind": "pipeline",
    "id": "p",
    "steps": [
        {"operation": {"kind": "router", "id": "r", "routes": [{"name": "long", "condition_name": "question_is_long", "step": F}], "fallback_step": V}},
        {"operation": {"kind": "parallel", "id": "par", "merge": "merge_vote", "steps": [
            {"kind": "agent_step", "id": "g", "agent_name": "175b_finetuning"},
            {"kind": "agent_step", "id": "h", "agent_name": "175b_verification"}]}},
    ],
}  # fmt: skip


def _spec(d: dict) -> object:
    import json

    return parse_topology(json.dumps(d))


def test_a_node_moved_from_a_fallback_into_a_parallel_branch_is_listed_as_moved() -> None:
    import copy

    after = copy.deepcopy(BEFORE)
    router = after["steps"][0]["operation"]
    router["fallback_step"] = {"kind": "agent_step", "id": "new", "agent_name": "175b_finetuning"}
    after["steps"][1]["operation"]["steps"].append(V)
    view = diff_view(_spec(BEFORE), _spec(after))
    rows = view.changes.to_dict("records")
    moved = [r for r in rows if r["change"] == "moved"]
    assert [(r["node_id"], r["path_before"], r["path_after"]) for r in moved] == [
        ("v", "$.steps[0].operation.fallback_step", "$.steps[1].operation.steps[2]")
    ]
    assert view.counts["moved"] == 1 and view.counts["added"] == 1
    assert "#1f77b4" in view.before_dot and "#1f77b4" in view.after_dot


def test_a_moved_node_whose_auto_id_changed_is_matched_by_content() -> None:
    import copy

    before = copy.deepcopy(BEFORE)
    before["steps"][0]["operation"]["fallback_step"] = {**V, "id": "agent_step_3"}
    after = copy.deepcopy(BEFORE)
    after["steps"][0]["operation"]["fallback_step"] = {**F, "id": "f2"}
    after["steps"][1]["operation"]["steps"].append({**V, "id": "agent_step_9"})
    rows = diff_view(_spec(before), _spec(after)).changes.to_dict("records")
    moved = [r for r in rows if r["change"] == "moved"]
    assert [r["node_id"] for r in moved] == ["agent_step_3 -> agent_step_9"]
    assert not [r for r in rows if r["change"] == "removed"]


def test_a_step_inserted_before_others_moves_nothing() -> None:
    import copy

    after = copy.deepcopy(BEFORE)
    after["steps"].insert(
        0,
        {
            "operation": {
                "kind": "function_step",
                "id": "x",
                "callable_name": "extract_final_answer",
            }
        },
    )
    view = diff_view(_spec(BEFORE), _spec(after))
    assert view.counts["moved"] == 0 and view.counts["added"] == 1


def test_a_rollback_is_labelled_as_one() -> None:
    rec = {
        "proposal_id": 4,
        "target": "reg/solver",
        "decision": "approved",
        "comment": "rollback to v1: back",
        "run_id": None,
        "proposed_by": "ann",
    }
    assert is_rollback(rec)
    assert proposal_label(rec, "reg/") == "#4 solver (rollback to v1, by ann)"
