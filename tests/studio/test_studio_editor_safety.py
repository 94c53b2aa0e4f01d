"""The editor never acts on a node the user did not pick, can undo and redo, and keeps its
draft across a reload, and its JSON tab is honest (it validated only on Ctrl+Enter, showed each
error three times, and saved the last valid version while the text was invalid).

Acting on the wrong node was: after "Apply changes to this node" renamed the selected node, the node
radio (whose value Streamlit keeps as the option's label) matched no option, fell back to the root,
and the next Move/Delete/Replace/Wrap hit the root. Each test renames a non-root node first, then
acts, and asserts which node changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
EDITOR = str(REPO / "pages" / "editor.py")

TWO = json.dumps(
    {
        "kind": "pipeline",
        "id": "seed",
        "steps": [
            {
                "operation": {
                    "kind": "router",
                    "id": "r",
                    "routes": [
                        {
                            "name": "long",
                            "condition_name": "question_is_long",
                            "step": {
                                "kind": "agent_step",
                                "id": "a",
                                "agent_name": "175b_finetuning",
                            },
                        }
                    ],
                    "fallback_step": {
                        "kind": "agent_step",
                        "id": "b",
                        "agent_name": "6b_verification",
                    },
                }
            },
            {"operation": {"kind": "agent_step", "id": "c", "agent_name": "6b_finetuning"}},
        ],
    }
)
"""A router (route `a`, fallback `b`) then a second step `c`."""

FALLBACK = "$.steps[0].operation.fallback_step"
SECOND = "$.steps[1].operation"


@pytest.fixture
def editor(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(EDITOR)
    at.run()
    at.session_state["editor_incoming"] = {"spec_json": TWO, "source": "test"}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _spec(at: AppTest) -> dict[str, Any]:
    return json.loads(at.session_state["ed_spec"])


def _rename(at: AppTest, path: str, new_id: str) -> None:
    """Select the node at `path`, type a new id in its form and apply it."""
    at.radio(key="ed_sel").set_value(path).run()
    [id_box] = [t for t in at.text_input if t.key.endswith("_id")]
    id_box.set_value(new_id)
    [submit] = [b for b in at.button if b.label == "Apply changes to this node"]
    submit.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == []
    # the renamed node is still the selected one (it fell back to the root)
    assert at.radio(key="ed_sel").value == path
    assert f"at `{path}`" in "\n".join(str(m.value) for m in at.markdown)


def _messages(at: AppTest) -> list[str]:
    return [str(m.value) for m in [*at.success, *at.error, *at.info]]


def test_move_after_a_rename_moves_the_renamed_step(editor: AppTest) -> None:
    at = editor
    _rename(at, SECOND, "c2")
    at.button(key="ed_up").click().run()
    steps = _spec(at)["steps"]
    assert [s["operation"]["id"] for s in steps] == ["c2", "r"]
    assert "Moved $.steps[1].operation (agent_step [c2]) up." in _messages(at)
    assert at.radio(key="ed_sel").value == "$.steps[0].operation"  # the selection followed it


def test_delete_after_a_rename_deletes_the_renamed_step(editor: AppTest) -> None:
    at = editor
    _rename(at, SECOND, "c2")
    at.button(key="ed_delete").click().run()
    spec = _spec(at)
    assert [s["operation"]["id"] for s in spec["steps"]] == ["r"]
    assert "Deleted $.steps[1].operation (agent_step [c2])." in _messages(at)
    assert at.radio(key="ed_sel").value == "$"  # its parent


def test_replace_after_a_rename_replaces_the_fallback_not_the_root(editor: AppTest) -> None:
    at = editor
    _rename(at, FALLBACK, "b2")
    at.selectbox(key="ed_new_name").set_value("175b_verification").run()
    at.button(key="ed_replace").click().run()
    spec = _spec(at)
    router = spec["steps"][0]["operation"]
    assert router["id"] == "r" and spec["id"] == "seed"
    assert router["fallback_step"]["agent_name"] == "175b_verification"
    assert router["fallback_step"]["id"] != "b2"
    assert router["routes"][0]["step"]["id"] == "a"
    assert spec["steps"][1]["operation"]["id"] == "c"


def test_wrap_after_a_rename_wraps_the_fallback_not_the_whole_topology(editor: AppTest) -> None:
    at = editor
    _rename(at, FALLBACK, "b2")
    at.selectbox(key="ed_wrap_kind").set_value("pipeline").run()
    at.button(key="ed_wrap").click().run()
    spec = _spec(at)
    assert spec["id"] == "seed" and spec["kind"] == "pipeline"
    wrapper = spec["steps"][0]["operation"]["fallback_step"]
    assert wrapper["kind"] == "pipeline"
    assert wrapper["steps"][0]["operation"]["id"] == "b2"
    assert any(
        m.startswith(f"Wrapped {FALLBACK} (agent_step [b2]) in a pipeline") for m in _messages(at)
    )
    assert at.radio(key="ed_sel").value == FALLBACK  # the new wrapper


def test_undo_and_redo_step_through_the_edits(editor: AppTest) -> None:
    at = editor
    _rename(at, SECOND, "c2")
    at.button(key="ed_delete").click().run()
    assert [s["operation"]["id"] for s in _spec(at)["steps"]] == ["r"]
    at.button(key="ed_undo").click().run()
    assert [s["operation"]["id"] for s in _spec(at)["steps"]] == ["r", "c2"]
    assert '"id": "c2"' in at.text_area(key="ed_json").value
    at.button(key="ed_undo").click().run()
    assert [s["operation"]["id"] for s in _spec(at)["steps"]] == ["r", "c"]
    at.button(key="ed_redo").click().run()
    at.button(key="ed_redo").click().run()
    assert [s["operation"]["id"] for s in _spec(at)["steps"]] == ["r"]
    assert at.button(key="ed_redo").disabled
    assert not at.exception


def test_a_new_session_with_the_draft_link_gets_the_working_copy_back(
    editor: AppTest, studio_env: Path
) -> None:
    at = editor
    _rename(at, SECOND, "c2")
    at.text_input(key="ed_name").set_value("my-router").run()
    draft = at.query_params["draft"]
    assert isinstance(draft, str) and draft
    assert list(Path(f"{studio_env}.drafts").glob("*.json"))
    # a reload is a new session with the same URL
    again = AppTest.from_file(APP, default_timeout=120)
    again.run()
    again.switch_page(EDITOR)
    again.query_params["draft"] = draft
    again.run()
    assert not again.exception
    assert [s["operation"]["id"] for s in _spec(again)["steps"]] == ["r", "c2"]
    assert again.text_input(key="ed_name").value == "my-router"
    assert any(m.startswith("Restored your draft") for m in _messages(again))
    again.button(key="ed_undo").click().run()  # the history came back too
    assert [s["operation"]["id"] for s in _spec(again)["steps"]] == ["r", "c"]


def test_invalid_json_is_reported_once_marks_the_graph_stale_and_disables_save(
    editor: AppTest,
) -> None:
    at = editor
    at.text_area(key="ed_json").set_value('{"kind": "pipeline", "steps": [}').run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Not valid: 1 problem(s), listed below.")
    [table] = [d.value for d in at.dataframe if "JSON path" in d.value.columns]
    assert table["JSON path"].tolist() == ["$"]
    assert any(
        str(w.value).startswith("Stale: the JSON tab's text has 1 problem(s)") for w in at.warning
    )
    assert at.button(key="ed_save").disabled
    assert at.button(key="ed_eval").disabled
    assert "when you press Ctrl+Enter or leave the box" in at.text_area(key="ed_json").label
    # fixed: Save is back and the graph is no longer stale
    at.text_area(key="ed_json").set_value(TWO).run()
    assert not at.button(key="ed_save").disabled
    assert not [w for w in at.warning if str(w.value).startswith("Stale")]
