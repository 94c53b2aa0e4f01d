"""A problem declared in its TOML alone (`core.problems.declared`), written by
`core.problems.replay_file.write_replay_problem`: replayed text and structured outputs with
their recorded cost and latency, the `exact` score, and one-line refusals at load."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents.local_models import register_local_model, unregister_local_model
from core.errors import ProblemError
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice
from core.problems import load_problem
from core.problems.declared import score_exact
from core.problems.replay_file import ReplayLine, replay_table, write_replay_problem

SINGLE = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "{}"}}]}


def _single(agent: str) -> dict[str, object]:
    return json.loads(json.dumps(SINGLE).replace("{}", agent))


def _gold(structured: bool) -> list[GoldExample]:
    return [
        GoldExample(
            id=f"e{i}",
            input=f"question {i}",
            expected={"label": f"L{i % 2}"} if structured else f"L{i % 2}",
        )
        for i in range(8)
    ]


def _write(root: Path, structured: bool) -> Path:
    """Agent `a` right on e0..e5 (wrong on e6, e7), 10 in / 2 out tokens, 100 + i ms; agent `b`
    always right, 10 in / 5 out, 900 ms."""
    lines: list[ReplayLine] = []
    for i in range(8):
        for agent, right in (("a", i < 6), ("b", True)):
            label = f"L{i % 2}" if right else "wrong"
            output = {"label": label.upper() + " ", "why": "x"} if structured else f" {label}\n"
            lines.append(
                ReplayLine(
                    id=f"e{i}",
                    agent=agent,
                    output=output,
                    input_tokens=10,
                    output_tokens=2 if agent == "a" else 5,
                    latency_ms=100.0 + i if agent == "a" else 900.0,
                )
            )
    return write_replay_problem(
        root / "p",
        name="p",
        gold=_gold(structured),
        replay=replay_table(lines),
        prices={
            "a": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0),
            "b": ModelPrice(free=True),
        },
    )


@pytest.mark.parametrize("structured", [False, True])
def test_a_replayed_agent_answers_what_it_recorded_at_its_recorded_cost(
    tmp_path: Path, structured: bool
) -> None:
    problem = load_problem(_write(tmp_path, structured))
    examples = sorted(
        problem.splits["validation"] + problem.splits["test"], key=lambda e: str(e.id)
    )
    ev = problem.evaluator()
    a = asyncio.run(ev.evaluate(_single("a"), examples))
    b = asyncio.run(ev.evaluate(_single("b"), examples))
    assert (a.status, b.status) == ("ok", "ok")
    assert a.accuracy == 6 / 8
    assert b.accuracy == 1.0
    # 10 input tokens at $1/1K and 2 output tokens at $2/1K a call; b is free
    assert a.cost_usd == pytest.approx(0.010 + 0.004)
    assert b.cost_usd == 0.0
    assert a.latency_ms == pytest.approx(sum(100.0 + i for i in range(8)) / 8)
    assert b.latency_ms == 900.0
    # the agent's output is the recorded one, typed as recorded (text, or a dict)
    output = asyncio.run(problem.agent_registry.create("b").run("question 1")).output
    assert output == ({"label": "L1 ", "why": "x"} if structured else " L1\n")


@pytest.mark.parametrize(
    ("output", "expected", "score"),
    [
        (" Refund\n", "refund", 1.0),
        ("refund.", "refund", 0.0),
        ({"label": "Refund ", "why": "..."}, {"label": "refund"}, 1.0),
        ({"label": "bug"}, {"label": "refund"}, 0.0),
        ({"why": "..."}, {"label": "refund"}, 0.0),
        ("refund", {"label": "refund"}, 0.0),
        ({"label": "refund"}, "refund", 0.0),
        (42, 42, 1.0),
        ("", "", 1.0),
        (None, "refund", 0.0),
    ],
)
def test_exact_compares_normalised_text_and_the_expected_fields(
    output: object, expected: object, score: float
) -> None:
    assert score_exact(output, GoldExample(input="x", expected=expected)) == score


def _edit_toml(root: Path, old: str, new: str) -> None:
    toml = root / "problem.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))


def test_a_model_the_replay_file_does_not_record_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    root = _write(tmp_path, False)
    _edit_toml(root, 'model = "replay:b"', 'model = "replay:c"')
    with pytest.raises(ProblemError) as err:
        load_problem(root)
    assert str(err.value) == (
        f"{root / 'problem.toml'}: field 'agents.b.model': replay.jsonl records no agent 'c' "
        "(it records a, b)"
    )


def test_an_unregistered_function_model_and_an_unpriced_one_are_refused(tmp_path: Path) -> None:
    root = _write(tmp_path, False)
    _edit_toml(root, 'model = "replay:b"', 'model = "function:judge"')
    with pytest.raises(ProblemError) as err:
        load_problem(root)
    assert str(err.value) == (
        f"{root / 'problem.toml'}: field 'agents.b.model': no in-process model is registered as "
        "'function:judge' (register a FunctionModel with "
        "core.agents.local_models.register_local_model first)"
    )

    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("L0")])

    register_local_model("function:judge", FunctionModel(judge, model_name="judge"))
    try:
        with pytest.raises(ProblemError) as err:
            load_problem(root)
    finally:
        unregister_local_model("function:judge")
    assert str(err.value) == (
        f"{root / 'problem.toml'}: field 'models.prices.\"function:judge\"': agent 'b' runs "
        "model 'function:judge', which has no price: add [models.prices.\"function:judge\"] "
        "with input_usd_per_1k and output_usd_per_1k (USD per 1,000 tokens), or free = true"
    )


def test_agents_declared_beside_a_registries_module_are_refused(tmp_path: Path) -> None:
    root = _write(tmp_path, False)
    (root / "registries.py").write_text("def build(ctx): ...\n")
    with pytest.raises(ProblemError) as err:
        load_problem(root)
    assert str(err.value) == (
        f"{root / 'problem.toml'}: field 'agents': declares [agents] and the directory has "
        "registries.py: declare the agents in one place (drop the [agents] tables, or "
        "registries.py)"
    )


def test_a_local_model_is_registered_under_the_name_its_usage_is_recorded_as() -> None:
    def f(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("x")])

    with pytest.raises(ValueError, match="differs from the name its usage is recorded as"):
        register_local_model("function:other", FunctionModel(f, model_name="judge"))


def test_write_replay_problem_needs_a_price_for_every_recorded_agent(tmp_path: Path) -> None:
    lines = [
        ReplayLine(id="e0", agent="a", output="x", input_tokens=1, output_tokens=1, latency_ms=1)
    ]
    with pytest.raises(ProblemError) as err:
        write_replay_problem(
            tmp_path / "p", name="p", gold=_gold(False), replay=replay_table(lines), prices={}
        )
    assert str(err.value) == (
        "no price for recorded agent(s) a: give each USD per 1K input and output tokens, or "
        "declare it free"
    )
    assert not (tmp_path / "p").exists()
