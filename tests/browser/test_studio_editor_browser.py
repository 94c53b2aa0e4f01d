"""The editor in a real browser: no action on the wrong node, no lost work, an honest JSON tab,
undo and redo, and a draft that survives a reload.

Acting on the wrong node showed only in a browser: the node radio keeps its choice as the option's
label, so after "Apply changes to this node" renamed the selected node the radio showed nothing
selected and the next Move/Delete/Replace/Wrap acted on the root. Here a non-root node is renamed
before each action, and the action's message and the tree say which node changed. Then undo and
redo, a reload that keeps the draft, and invalid JSON that disables Save.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from studio_harness import idle, no_errors, require_chromium, settle, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

TWO = {
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
                        "step": {"kind": "agent_step", "id": "a", "agent_name": "175b_finetuning"},
                    }
                ],
                "fallback_step": {"kind": "agent_step", "id": "b", "agent_name": "6b_verification"},
            }
        },
        {"operation": {"kind": "agent_step", "id": "c", "agent_name": "6b_finetuning"}},
    ],
}


def _tab(pg: Any, name: str) -> None:
    pg.get_by_role("tab", name=name, exact=True).click()
    idle(pg)


def _set_json(pg: Any, text: str) -> None:
    _tab(pg, "JSON")
    box = pg.locator('[data-testid="stTextArea"] textarea').first
    box.fill(text)
    box.press("Control+Enter")
    idle(pg)


def _labels(pg: Any) -> list[str]:
    items = pg.locator('[data-testid="stRadio"]').first.locator('[role="radiogroup"] label')
    return [t.replace("\u2003", "").strip() for t in items.all_inner_texts()]


def _pick(pg: Any, label: str, path: str) -> None:
    _tab(pg, "Tree")
    pg.locator('[data-testid="stRadio"]').first.locator('[role="radiogroup"] label').filter(
        has_text=label
    ).first.click()
    idle(pg)
    pg.get_by_text(f"at {path}").first.wait_for(timeout=30_000)


def _rename(pg: Any, label: str, path: str, new_id: str) -> None:
    """Select a node, give it a new id through its form, and check it stays selected."""
    _pick(pg, label, path)
    # during the rerun the previous node's form stays on the page (stale) beside the new one
    # until the run ends: wait until the only "id" box is this node's, showing its id
    current = re.search(r"\[([^\]]+)\]$", label)
    assert current is not None, label
    old_id = current.group(1)
    box = pg.get_by_label("id", exact=True)
    _eventually(lambda: box.evaluate_all("els => els.map(e => e.value)") == [old_id])
    box.fill(new_id)
    pg.get_by_role("button", name="Apply changes to this node").click()
    idle(pg)
    pg.get_by_text(f"Updated {path}").first.wait_for(timeout=30_000)
    # still selected: the radio shows the renamed node checked, the form is its form
    checked = pg.locator('[data-testid="stRadio"]').first.locator(
        '[role="radiogroup"] label:has(input:checked)'
    )
    _eventually(lambda: f"[{new_id}]" in checked.first.inner_text())
    pg.get_by_text(f"at {path}").first.wait_for(timeout=30_000)


def _said(pg: Any, text: str) -> None:
    pg.get_by_text(text, exact=False).first.wait_for(timeout=30_000)
    idle(pg)
    no_errors(pg)


def _eventually(check: Any, timeout_s: float = 20.0) -> None:
    """Retry `check()` until it is true: Streamlit streams a run's elements, so the tree can
    arrive after the message above it on a loaded machine."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never true: {check}")
        time.sleep(0.25)


def test_edits_after_a_rename_act_on_the_renamed_node_undo_redo_and_reload(
    page: Any, studio: str
) -> None:
    page.goto(f"{studio}/editor")
    settle(page, "Topology editor")
    _set_json(page, json.dumps(TWO, indent=2))
    _tab(page, "Tree")
    _eventually(lambda: _labels(page)[-1].startswith("step 2: agent_step [c]"))

    # Move: rename step 2, move it up (it was "the root cannot be moved")
    _rename(page, "step 2: agent_step [c]", "$.steps[1].operation", "c2")
    page.get_by_role("button", name="Move up").click()
    idle(page)
    _said(page, "Moved $.steps[1].operation (agent_step [c2]) up.")
    _eventually(lambda: _labels(page)[1].startswith("step 1: agent_step [c2]"))

    # Wrap: rename the fallback, wrap it (it wrapped the whole topology, "$")
    fb = "$.steps[1].operation.fallback_step"
    _rename(page, "fallback: agent_step [b]", fb, "b2")
    page.get_by_role("button", name="Wrap", exact=True).click()
    idle(page)
    _said(page, f"Wrapped {fb} (agent_step [b2]) in a pipeline.")
    _eventually(lambda: any(x.startswith("fallback: pipeline [") for x in _labels(page)))
    assert _labels(page)[0].startswith("root: pipeline [seed]")
    shot(page, "editor-after-wrap")

    # undo and redo
    page.get_by_role("button", name=re.compile(r"^Undo")).click()
    idle(page)
    _eventually(lambda: any(x.startswith("fallback: agent_step [b2]") for x in _labels(page)))
    page.get_by_role("button", name=re.compile(r"^Redo")).click()
    idle(page)
    _eventually(lambda: any(x.startswith("fallback: pipeline [") for x in _labels(page)))
    # the tree is drawn before the script run ends and the draft is written at its end: wait
    # for the run (it has started: the tree changed) before reloading
    idle(page)

    # a reload keeps the draft (its id is in the URL), history included
    assert "draft=" in page.url
    page.reload()
    settle(page, "Topology editor")
    _said(page, "Restored your draft")
    _eventually(lambda: _labels(page)[1].startswith("step 1: agent_step [c2]"))
    assert any(x.startswith("fallback: pipeline [") for x in _labels(page)), _labels(page)

    # Replace: rename the route's step, replace it (it was refused at the root)
    route = "$.steps[1].operation.routes[0].step"
    _rename(page, "route 'long': agent_step [a]", route, "a2")
    page.get_by_role("button", name="Replace", exact=True).click()
    idle(page)
    _said(page, f"Replaced {route} (agent_step [a2]) with a agent_step")
    _eventually(lambda: not any("[a2]" in x for x in _labels(page)))
    assert _labels(page)[0].startswith("root: pipeline [seed]")

    # Delete: rename step 1, delete it (it was "cannot remove the root node")
    _rename(page, "step 1: agent_step [c2]", "$.steps[0].operation", "c3")
    page.get_by_role("button", name="Delete", exact=True).click()
    idle(page)
    _said(page, "Deleted $.steps[0].operation (agent_step [c3]).")
    _eventually(lambda: not any("[c3]" in x for x in _labels(page)))
    assert _labels(page)[1].startswith("step 1: router [r]")


def test_invalid_json_disables_save_and_marks_the_graph_stale(page: Any, studio: str) -> None:
    page.goto(f"{studio}/editor")
    settle(page, "Topology editor")
    _set_json(page, '{"kind": "pipeline", "steps": [}')
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert len(errors) == 1 and errors[0].startswith("Not valid: 1 problem(s)"), errors
    page.get_by_text("Stale: the JSON tab's text has 1 problem(s)").first.wait_for(timeout=30_000)
    _eventually(lambda: page.get_by_role("button", name="Save as new version").is_disabled())
    shot(page, "editor-invalid-json")
    _set_json(page, json.dumps(TWO))
    _eventually(lambda: page.get_by_role("button", name="Save as new version").is_enabled())
    no_errors(page)
