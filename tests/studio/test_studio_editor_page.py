"""The topology editor page (AppTest): names checked against the problem's registries, an honest
cost (measured when a run has evaluated the same topology), results that fit, a sample-size
caveat, and a JSON tab that stays open after an edit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
EDITOR = str(REPO / "pages" / "editor.py")

SEED = (
    '{"kind": "pipeline", "id": "seed", "name": "seed", "steps": [{"operation": '
    '{"kind": "agent_step", "id": "solve", "agent_name": "175b_finetuning"}}]}'
)
VERIFY = SEED.replace("175b_finetuning", "175b_verification")
"""Candidate 1 of the small store (measured there at $0.50 an example over 4 examples)."""

ROUTER = (
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "router", "id": "r", '
    '"routes": [{"name": "long", "condition_name": "question_is_long", "step": '
    '{"kind": "agent_step", "id": "a", "agent_name": "175b_finetuning"}}], "fallback_step": '
    '{"kind": "agent_step", "id": "b", "agent_name": "175b_verification"}}}]}'
)


@pytest.fixture
def editor(studio_env: Path) -> Iterator[AppTest]:
    """The studio on the small store, switched to the editor (the gsm8k_replay seed loaded)."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(EDITOR)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _open_spec(at: AppTest, spec_json: str) -> AppTest:
    at.session_state["editor_incoming"] = {"spec_json": spec_json, "source": "test"}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _errors(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.error]


def _markdown(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption])


def test_json_tab_refuses_an_unknown_agent_with_its_path_and_evaluate_says_why(
    editor: AppTest,
) -> None:
    at = editor
    assert "Valid topology: every name is registered in the problem." in [
        s.value for s in at.success
    ]
    at.text_area(key="ed_json").set_value(SEED.replace("175b_finetuning", "gpt-17")).run()
    assert not at.exception
    assert not [s for s in at.success if "Valid topology" in str(s.value)]
    [json_error] = _errors(at)  # once: the table lists it, Evaluate only says it is off
    registered = "175b_finetuning, 175b_verification, 6b_finetuning, 6b_verification"
    assert json_error == (
        "Not valid: 1 problem(s), listed below. The graph, Save and Evaluate use the last valid "
        "version until the text is fixed."
    )
    assert (
        "Evaluate is off while the JSON tab's text has 1 problem(s) (listed there)."
        in _markdown(at)
    )
    assert at.button(key="ed_eval").disabled
    errors = [d.value for d in at.dataframe if "JSON path" in d.value.columns][0]
    assert errors["JSON path"].tolist() == ["$.steps[0].operation.agent_name"]
    assert errors["problem"].tolist() == [f"unknown agent 'gpt-17'; registered: {registered}"]
    # fixed: valid again and Evaluate is back
    at.text_area(key="ed_json").set_value(SEED).run()
    assert _errors(at) == []
    assert not at.button(key="ed_eval").disabled


def test_a_working_copy_with_unknown_names_cannot_be_evaluated(editor: AppTest) -> None:
    at = _open_spec(editor, VERIFY.replace("175b_verification", "gpt-17"))
    text = (
        "This topology names 1 thing(s) the problem gsm8k_replay does not register; it cannot "
        "be evaluated until they are fixed:\n\n- `$.steps[0].operation.agent_name`: unknown "
        "agent 'gpt-17'"
    )
    errors = _errors(at)
    assert len(errors) == 2  # in the JSON tab and above Evaluate
    assert all(e.startswith(text) for e in errors)
    assert at.button(key="ed_eval").disabled


def test_cost_is_the_measured_one_when_a_run_evaluated_the_same_topology(
    editor: AppTest,
) -> None:
    at = editor
    seed_text = _markdown(at)
    # the seed's only agent (175b_finetuning) was never measured alone: no dollar guess
    assert (
        "**No cost estimate: no topology using only these agents (175b_finetuning) has a "
        "measured cost in the newest run of gsm8k_replay. The static rule alone was 4 to 6 "
        "times off the measured cost, so it is not shown; evaluate to measure it.** No run has "
        "measured this exact topology yet."
    ) in seed_text
    assert "Static rule: a rough guess, not a bound:" in seed_text
    assert "Static estimate" not in seed_text
    # ids do not matter: the store's candidate 1 has the same spec hash
    at = _open_spec(at, json.dumps({**json.loads(VERIFY), "id": "other"}))
    text = _markdown(at)
    assert (
        "**Measured cost per example: $0.500** (mean over 4 validation examples, run "
        "20250101-120000-abc123 candidate 1)."
    ) in text
    # calibrated on that one measurement: the static $6.00 times 0.5 / 6
    assert (
        "Calibrated estimate: $0.5000 per example (the static rule's $6.0000 times 0.0833, the "
        "median measured / static ratio of 1 topology using only these agents in the newest "
        "run of gsm8k_replay; one measurement)."
    ) in text
    assert "175b_verification = 200 calls a request; prices from" in text


def test_evaluation_numbers_are_short_with_n_and_a_95_percent_interval(editor: AppTest) -> None:
    at = editor
    at.number_input(key="ed_limit").set_value(5).run()
    at.button(key="ed_eval").click().run()
    assert not at.exception
    tiles = {m.label: m.value for m in at.metric}
    assert [k for k in tiles if k not in ("n agents", "depth", "n nodes")] == [
        "accuracy",
        "cost / example",
        "latency",
        "score",
    ]
    assert re.fullmatch(r"\d{1,3}\.\d%", tiles["accuracy"])
    assert re.fullmatch(r"\$0\.\d{3,5}", tiles["cost / example"])
    assert re.fullmatch(r"\d{1,3}(\.\d)? m?s", tiles["latency"])
    assert all(len(v) <= 8 for v in tiles.values()), tiles
    caveat = [c.value for c in at.caption if str(c.value).startswith("n = 5")]
    assert len(caveat) == 1
    assert re.fullmatch(
        r"n = 5: accuracy \d+\.\d%, 95% interval \d+\.\d% to \d+\.\d% \(Wilson\)\. A small "
        r"sample: set Examples to 0 to use the whole split\.",
        str(caveat[0]),
    )


def test_router_form_explains_an_empty_classifier_and_labels_pluralize(editor: AppTest) -> None:
    at = _open_spec(editor, ROUTER)
    labels = at.radio(key="ed_sel").options
    assert labels[0] == "root: pipeline [seed]  pipeline: 1 step"
    assert labels[1] == "\u2003step 1: router [r]  router: 1 route by conditions"
    at.radio(key="ed_sel").set_value("$.steps[0].operation").run()
    [clf] = [t for t in at.text_input if t.label == "classifier"]
    assert clf.value == ""
    assert clf.placeholder == "none: the routes' conditions decide"


def test_the_json_tab_stays_open_after_an_edit_message(editor: AppTest) -> None:
    at = editor
    at.radio(key="ed_sel").set_value("$.steps[0].operation").run()
    at.button(key="ed_insert").click().run()
    assert any(str(s.value).startswith("Inserted a agent_step") for s in at.success)
    at.text_area(key="ed_json").set_value(SEED.replace('"seed"', '"seed2"', 1)).run()
    assert not at.exception
    assert at.session_state["ed_tab"] == "JSON"
    assert '"id": "seed2"' in at.text_area(key="ed_json").value
