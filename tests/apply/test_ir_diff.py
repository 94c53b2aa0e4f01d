"""Structural diffs by node id, unified JSON diffs, and the colour maps for the two graphs."""

from __future__ import annotations

from typing import Any

from core.ir import TopologySpec, parse_topology
from core.ir.diff import (
    ADDED_COLOUR,
    CHANGED_COLOUR,
    REMOVED_COLOUR,
    NodeChange,
    diff_highlight,
    structural_diff,
    unified_json_diff,
)


def _agent(node_id: str, name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "id": node_id, "agent_name": name}


def _fn(node_id: str, name: str) -> dict[str, Any]:
    return {"kind": "function_step", "id": node_id, "callable_name": name}


def _pipe(*ops: dict[str, Any], node_id: str = "root") -> TopologySpec:
    return parse_topology(
        {"kind": "pipeline", "id": node_id, "steps": [{"operation": o} for o in ops]}
    )


BEFORE = _pipe(
    _agent("solve", "6b_finetuning"),
    _fn("vote", "majority_vote"),
    _fn("extract", "extract_answer"),
)
# a small edit: a bigger model, the vote replaced by an arithmetic check
AFTER = _pipe(
    _agent("solve", "175b_finetuning"),
    _fn("check", "check_arithmetic"),
    _fn("extract", "extract_answer"),
)


def _table(changes: list[NodeChange]) -> list[tuple[Any, ...]]:
    return [
        (c.node_id, c.change, c.kind, c.path_before, c.path_after, c.fields_changed)
        for c in changes
    ]


def test_small_edit_gives_the_added_removed_changed_table() -> None:
    assert _table(structural_diff(BEFORE, AFTER)) == [
        ("root", "changed", "pipeline", "$", "$", ("steps",)),
        (
            "solve",
            "changed",
            "agent_step",
            "$.steps[0].operation",
            "$.steps[0].operation",
            ("agent_name",),
        ),
        ("check", "added", "function_step", None, "$.steps[1].operation", ()),
        ("vote", "removed", "function_step", "$.steps[1].operation", None, ()),
    ]


def test_same_spec_has_no_changes_and_no_unified_lines() -> None:
    assert structural_diff(BEFORE, BEFORE) == []
    assert unified_json_diff(BEFORE, BEFORE) == ""


def test_a_change_inside_a_child_is_the_childs_not_the_parents() -> None:
    after = _pipe(
        _agent("solve", "6b_verification"),
        _fn("vote", "majority_vote"),
        _fn("extract", "extract_answer"),
    )
    assert _table(structural_diff(BEFORE, after)) == [
        (
            "solve",
            "changed",
            "agent_step",
            "$.steps[0].operation",
            "$.steps[0].operation",
            ("agent_name",),
        ),
    ]


def test_step_config_and_name_count_as_the_parents_own_fields() -> None:
    after = parse_topology(
        {
            "kind": "pipeline",
            "id": "root",
            "name": "cascade",
            "steps": [
                {
                    "operation": _agent("solve", "6b_finetuning"),
                    "config": {"on_error": "retry", "max_retries": 2},
                },
                {"operation": _fn("vote", "majority_vote")},
                {"operation": _fn("extract", "extract_answer")},
            ],
        }
    )
    assert _table(structural_diff(BEFORE, after)) == [
        ("root", "changed", "pipeline", "$", "$", ("name", "steps")),
    ]


def test_a_move_changes_both_parents_not_the_moved_node() -> None:
    before = parse_topology(
        {
            "kind": "pipeline",
            "id": "root",
            "steps": [
                {
                    "operation": {
                        "kind": "parallel",
                        "id": "fan",
                        "steps": [_agent("a", "6b_finetuning"), _agent("b", "175b_finetuning")],
                    }
                },
                {"operation": _fn("vote", "majority_vote")},
            ],
        }
    )
    after = parse_topology(
        {
            "kind": "pipeline",
            "id": "root",
            "steps": [
                {
                    "operation": {
                        "kind": "parallel",
                        "id": "fan",
                        "steps": [_agent("a", "6b_finetuning")],
                    }
                },
                {"operation": _agent("b", "175b_finetuning")},
                {"operation": _fn("vote", "majority_vote")},
            ],
        }
    )
    assert _table(structural_diff(before, after)) == [
        ("root", "changed", "pipeline", "$", "$", ("steps",)),
        ("fan", "changed", "parallel", "$.steps[0].operation", "$.steps[0].operation", ("steps",)),
    ]


def test_kind_change_under_one_id_is_a_change_of_kind() -> None:
    after = _pipe(
        _agent("solve", "6b_finetuning"),
        _agent("vote", "6b_verification"),
        _fn("extract", "extract_answer"),
    )
    (change,) = structural_diff(BEFORE, after)
    assert change.node_id == "vote"
    assert change.change == "changed"
    assert change.kind == "agent_step"
    assert change.fields_changed == (
        "agent_name",
        "callable_name",
        "inline_spec",
        "kind",
        "name",
    )


def test_none_sides_are_all_added_or_all_removed() -> None:
    assert [(c.node_id, c.change) for c in structural_diff(None, BEFORE)] == [
        ("root", "added"),
        ("solve", "added"),
        ("vote", "added"),
        ("extract", "added"),
    ]
    assert [(c.node_id, c.change) for c in structural_diff(BEFORE, None)] == [
        ("root", "removed"),
        ("solve", "removed"),
        ("vote", "removed"),
        ("extract", "removed"),
    ]
    assert structural_diff(None, None) == []


def test_specs_without_ids_are_diffed_with_generated_ids() -> None:
    bare_before = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "6b_finetuning"}},
                {"operation": {"kind": "function_step", "callable_name": "extract_answer"}},
            ],
        }
    )
    bare_after = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "175b_finetuning"}},
                {"operation": {"kind": "function_step", "callable_name": "extract_answer"}},
            ],
        }
    )
    changes = structural_diff(bare_before, bare_after)
    assert [(c.change, c.kind, c.path_after, c.fields_changed) for c in changes] == [
        ("changed", "agent_step", "$.steps[0].operation", ("agent_name",)),
    ]
    # deterministic: the same inputs give the same ids
    assert structural_diff(bare_before, bare_after) == changes


def test_unified_diff_lines_for_the_small_edit() -> None:
    assert unified_json_diff(BEFORE, AFTER).splitlines() == [
        "--- before",
        "+++ after",
        "@@ -4,15 +4,15 @@",
        '   "steps": [',
        "     {",
        '       "operation": {',
        '-        "agent_name": "6b_finetuning",',
        '+        "agent_name": "175b_finetuning",',
        '         "id": "solve",',
        '         "kind": "agent_step"',
        "       }",
        "     },",
        "     {",
        '       "operation": {',
        '-        "callable_name": "majority_vote",',
        '-        "id": "vote",',
        '+        "callable_name": "check_arithmetic",',
        '+        "id": "check",',
        '         "kind": "function_step"',
        "       }",
        "     },",
    ]


def test_unified_diff_accepts_text_dicts_and_none_with_labels() -> None:
    text = unified_json_diff('{"b": 1, "a": [1]}', {"a": [1, 2], "b": 1}, fromfile="x", tofile="y")
    assert text == (
        '--- x\n+++ y\n@@ -1,6 +1,7 @@\n {\n   "a": [\n-    1\n+    1,\n+    2\n   ],\n'
        '   "b": 1\n }\n'
    )
    assert unified_json_diff(None, {"a": 1}).splitlines() == [
        "--- before",
        "+++ after",
        "@@ -0,0 +1,3 @@",
        "+{",
        '+  "a": 1',
        "+}",
    ]


def test_highlight_colours_each_side() -> None:
    before, after = diff_highlight(structural_diff(BEFORE, AFTER))
    assert before == {"root": CHANGED_COLOUR, "solve": CHANGED_COLOUR, "vote": REMOVED_COLOUR}
    assert after == {"root": CHANGED_COLOUR, "solve": CHANGED_COLOUR, "check": ADDED_COLOUR}


def test_highlight_maps_colour_the_dot_graphs_of_specs_with_assigned_ids() -> None:
    from core.ir.dot import to_dot
    from core.ir.ids import assign_ids

    bare_before = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "6b_finetuning"}},
            ],
        }
    )
    bare_after = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "175b_finetuning"}},
                {"operation": {"kind": "function_step", "callable_name": "extract_answer"}},
            ],
        }
    )
    before_colours, after_colours = diff_highlight(structural_diff(bare_before, bare_after))
    assert before_colours == {"pipeline_1": CHANGED_COLOUR, "agent_step_1": CHANGED_COLOUR}
    assert after_colours == {
        "pipeline_1": CHANGED_COLOUR,
        "agent_step_1": CHANGED_COLOUR,
        "function_step_1": ADDED_COLOUR,
    }
    dot_before = to_dot(assign_ids(bare_before), highlight=before_colours)
    dot_after = to_dot(assign_ids(bare_after), highlight=after_colours)
    assert dot_before.count(f'fillcolor="{CHANGED_COLOUR}"') == 2
    assert dot_after.count(f'fillcolor="{CHANGED_COLOUR}"') == 2
    assert dot_after.count(f'fillcolor="{ADDED_COLOUR}"') == 1
