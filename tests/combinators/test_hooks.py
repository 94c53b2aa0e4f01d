"""Agent steps on ballots (BallotHooks): prompted with the original input, candidates
appended, structured answers compared through the answer field, the root unwrapped."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.combinators import Answer, Ballot, BallotCandidate, BallotHooks
from core.combinators.library import agreement_entries, ballot_entries
from core.hydrate import AgentRegistry, CallableRegistry, topology_from_spec
from core.ir import parse_topology


class Label(BaseModel):
    label: str


PROMPTS: list[str] = []


def labeller(label: str) -> Any:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        PROMPTS.append(str(getattr(messages[-1].parts[-1], "content", "")))
        args = Label(label=label).model_dump_json()
        return ModelResponse(parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=args)])

    return respond


def texter(text: str) -> Any:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        PROMPTS.append(str(getattr(messages[-1].parts[-1], "content", "")))
        return ModelResponse(parts=[TextPart(text)])

    return respond


def registries(answers: dict[str, Any], structured: bool) -> tuple[AgentRegistry, CallableRegistry]:
    agents = AgentRegistry()
    for name, fn in answers.items():
        agents.register(
            name, Agent(FunctionModel(fn), output_type=Label if structured else str, name=name)
        )
    calls = CallableRegistry()
    for e in [*ballot_entries(Answer("label" if structured else None)), *agreement_entries()]:
        calls.register(e.name, e.fn, e.description)
    return agents, calls


GATE = {
    "kind": "pipeline",
    "steps": [
        {
            "operation": {
                "kind": "parallel",
                "steps": [
                    {"kind": "agent_step", "agent_name": "a"},
                    {"kind": "agent_step", "agent_name": "b"},
                ],
                "merge": "collect_candidates",
            }
        },
        {
            "operation": {
                "kind": "router",
                "routes": [
                    {
                        "name": "accept",
                        "step": {"kind": "function_step", "callable_name": "keep_answer"},
                        "condition_name": "all_agree",
                    }
                ],
                "fallback_step": {"kind": "agent_step", "agent_name": "c"},
            }
        },
    ],
}


def run(spec: dict[str, Any], answers: dict[str, Any], structured: bool, field: str | None) -> Any:
    agents, calls = registries(answers, structured)
    topology = topology_from_spec(
        parse_topology(spec),
        callable_registry=calls,
        agent_registry=agents,
        hooks=BallotHooks(Answer(field)),
    )
    PROMPTS.clear()
    return asyncio.run(topology.execute("My card was charged twice"))


def test_a_structured_gate_agrees_through_the_answer_field_and_returns_a_plain_output() -> None:
    answers = {"a": labeller("Billing"), "b": labeller(" billing"), "c": labeller("refund")}
    out = run(GATE, answers, structured=True, field="label")
    assert out == Label(label=" billing")  # agreed: the last candidate's raw output is kept
    assert PROMPTS == ["My card was charged twice"] * 2  # c never ran
    answers["b"] = labeller("bug")
    out = run(GATE, answers, structured=True, field="label")
    assert out == Label(label="refund")
    # the escalation agent is prompted with the original input, not with the candidates
    assert PROMPTS == ["My card was charged twice"] * 3


def test_a_text_gate_escalates_on_a_blank_answer() -> None:
    answers = {"a": texter(" "), "b": texter(" "), "c": texter("billing")}
    assert run(GATE, answers, structured=False, field=None) == "billing"


def test_an_agent_after_an_agent_is_prompted_with_the_original_input() -> None:
    chain = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "a"}},
            {"operation": {"kind": "agent_step", "agent_name": "b"}},
        ],
    }
    out = run(chain, {"a": texter("x"), "b": texter("y")}, structured=False, field=None)
    assert out == "y"
    assert PROMPTS == ["My card was charged twice"] * 2


def test_a_critique_makes_the_next_agent_revise() -> None:
    agents, calls = registries({"a": texter("z")}, structured=False)
    step = topology_from_spec(
        parse_topology(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}],
            }
        ),
        callable_registry=calls,
        agent_registry=agents,
        hooks=BallotHooks(Answer()),
    )
    PROMPTS.clear()
    first = Ballot(input="q").model_copy(update={"critique": "too short"})
    assert asyncio.run(step.execute(first)) == "z"  # no candidate yet: the input itself
    answered = Ballot(input="q").with_candidate(BallotCandidate(agent="a", output="y", answer="y"))
    asyncio.run(step.execute(answered.model_copy(update={"critique": "too short"})))
    assert PROMPTS == [
        "q",
        "q\n\nA previous answer was:\ny\n\nA reviewer said:\ntoo short\n\nGive a corrected answer.",
    ]


def test_an_agent_classifier_after_an_agent_sees_its_output_not_the_ballot() -> None:
    spec = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "a"}},
            {
                "operation": {
                    "kind": "router",
                    "name": "pick",
                    "classifier": "cls",
                    "routes": [
                        {"name": "b", "step": {"kind": "agent_step", "agent_name": "b"}},
                        {"name": "c", "step": {"kind": "agent_step", "agent_name": "c"}},
                    ],
                }
            },
        ],
    }
    answers = {"a": texter("refund please"), "b": texter("B"), "c": texter("C"), "cls": texter("c")}
    assert run(spec, answers, structured=False, field=None) == "C"
    # a's prompt, then the classifier's (a's output, as without the library), then c's
    assert PROMPTS == ["My card was charged twice", "refund please", "My card was charged twice"]
