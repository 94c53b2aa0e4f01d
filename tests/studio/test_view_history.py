"""Undo/redo history, the selection that follows the edited node, and stored drafts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.ir import parse_topology
from studio.drafts import Draft, DraftStore
from studio.views.editor import delete_node, follow_selection, move_node, wrap_node
from studio.views.history import MAX_UNDO, EditHistory

SPEC = parse_topology(
    '{"kind": "pipeline", "id": "p", "steps": [{"operation": {"kind": "agent_step", "id": "a",'
    ' "agent_name": "x"}}, {"operation": {"kind": "agent_step", "id": "b", "agent_name": "y"}}]}'
)


def test_push_undo_redo_and_a_new_edit_forgets_redo() -> None:
    h = EditHistory("v0").push("v1").push("v2")
    assert h.push("v2") is h  # no change, no step
    h = h.back().back()
    assert (h.current, h.undo, h.redo) == ("v0", (), ("v2", "v1"))
    assert h.back() == h
    h = h.forward()
    assert h.current == "v1"
    h = h.push("v3")
    assert (h.current, h.undo, h.redo) == ("v3", ("v0", "v1"), ())
    assert EditHistory.from_json(h.to_json()) == h
    assert EditHistory.from_json({"current": 1}) is None


def test_the_undo_list_is_bounded() -> None:
    h = EditHistory("0")
    for i in range(1, MAX_UNDO + 10):
        h = h.push(str(i))
    assert len(h.undo) == MAX_UNDO and h.undo[0] == "9"


@pytest.mark.parametrize(
    ("action", "path", "fn", "want"),
    [
        ("move", "$.steps[1].operation", lambda s: move_node(s, "$.steps[1].operation", -1), "$.steps[0].operation"),
        ("delete", "$.steps[1].operation", lambda s: delete_node(s, "$.steps[1].operation"), "$"),
        ("wrap", "$.steps[1].operation", lambda s: wrap_node(s, "$.steps[1].operation", "pipeline"), "$.steps[1].operation"),
    ],
)  # fmt: skip
def test_the_selection_follows_the_node(action: str, path: str, fn: object, want: str) -> None:
    after = fn(SPEC)  # type: ignore[operator]
    assert follow_selection(SPEC, after, path, action) == want


def test_drafts_round_trip_and_refuse_bad_ids(tmp_path: Path) -> None:
    store = DraftStore.beside(tmp_path / "runs.duckdb")
    d = Draft("abcdefgh123", EditHistory("v1", ("v0",)), name="n", source="s", problem="p")
    assert store.put(d)
    got = store.get("abcdefgh123")
    assert got is not None and (got.history, got.name, got.problem) == (d.history, "n", "p")
    assert (got.parent, got.origin_hash) == (None, "")
    # the candidate it was loaded from comes back too (the evaluations compare with it)
    assert store.put(Draft("parentdraft1", EditHistory("v"), parent=("run-1", 3), origin_hash="h"))
    got = store.get("parentdraft1")
    assert got is not None and (got.parent, got.origin_hash) == (("run-1", 3), "h")
    (tmp_path / "runs.duckdb.drafts" / "oddparent12.json").write_text(
        '{"history": ' + json.dumps(EditHistory("v").to_json()) + ', "parent": ["r", true]}'
    )
    odd = store.get("oddparent12")
    assert odd is not None and odd.parent is None
    assert store.get("../../etc/passwd") is None
    assert not store.put(Draft("../x", EditHistory("v")))
    (tmp_path / "runs.duckdb.drafts" / "brokenbroken.json").write_text("{")
    assert store.get("brokenbroken") is None
