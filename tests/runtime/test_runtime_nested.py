"""A nested topology built directly from runtime objects: router -> pipeline -> parallel -> loop.

Every agent runs on its own `FunctionModel` (named after the agent, with fixed token counts), so
the output, the trace's shape and the usage per agent are all exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pydantic_ai.models
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.runtime import (
    AgentStep,
    EvalResult,
    FunctionStep,
    Parallel,
    Pipeline,
    RefinementLoop,
    Route,
    Router,
    Trace,
    capture_trace,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def _prompt(messages: list[ModelMessage]) -> str:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    parts = [p for p in first.parts if isinstance(p, UserPromptPart)]
    return str(parts[0].content)


def text_model(name: str, reply: Callable[[str], str], tokens: tuple[int, int]) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart(reply(_prompt(messages)))],
            usage=RequestUsage(input_tokens=tokens[0], output_tokens=tokens[1]),
        )

    return FunctionModel(answer, model_name=name)


def judge_model() -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        draft = _prompt(messages)
        args = {"passed": draft.endswith("**"), "feedback": "sharpen", "score": draft.count("*")}
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, args)],
            usage=RequestUsage(input_tokens=4, output_tokens=1),
        )

    return FunctionModel(answer, model_name="judge")


def build() -> Router:
    classifier = Agent(
        text_model("classifier", lambda q: "Math" if "+" in q else "chat", (5, 1)),
        name="classifier",
    )
    solver = Agent(text_model("solver", lambda q: f"answer({q})", (10, 4)), name="solver")
    checker = Agent(text_model("checker", lambda a: f"checked({a})", (3, 1)), name="checker")
    refiner = Agent(text_model("refiner", lambda p: p + "*", (6, 2)), name="refiner")
    judge = Agent(judge_model(), output_type=EvalResult, name="judge")

    loop = RefinementLoop(
        AgentStep(refiner, node_id="refine"),
        judge,
        lambda current, output, verdict: output,  # refine the latest draft
        max_iterations=3,
        name="polish",
        node_id="loop",
    )
    parallel = Parallel([AgentStep(checker, node_id="check"), loop], name="verify", node_id="par")
    pipeline = Pipeline(
        [
            AgentStep(solver, node_id="solve"),
            FunctionStep(lambda a: f"{a} v1", name="draft", node_id="draft"),
            parallel,
            FunctionStep(lambda outs: " | ".join(outs), name="join", node_id="join"),
        ],
        name="math_flow",
        node_id="pipe",
    )
    return Router(
        [
            Route("math", pipeline),
            Route("chat", FunctionStep(str.upper, name="chat", node_id="chat")),
        ],
        classifier=classifier,
        name="triage",
        node_id="root",
    )


def _run(router: Router, question: str) -> tuple[Any, Trace]:
    async def go() -> tuple[Any, Trace]:
        with capture_trace() as trace:
            out = await router.run(question)
        return out, trace

    return asyncio.run(go())


def test_nested_output_spans_and_usage() -> None:
    out, trace = _run(build(), "2+3")
    # solver, then draft adds " v1", then in parallel: the checker, and the loop whose refiner
    # adds a "*" per iteration until the judge passes a draft ending in "**"; then join
    assert out == "checked(answer(2+3) v1) | answer(2+3) v1**"

    by_id = {s.span_id: s for s in trace.spans}

    def parent_of(i: int) -> str | None:
        pid = by_id[i].parent_id
        return None if pid is None else (by_id[pid].node_id or by_id[pid].name)

    rows = sorted((s.kind, s.name, s.node_id, parent_of(s.span_id)) for s in trace.spans)
    assert rows == sorted(
        [
            ("router", "triage", "root", None),
            ("agent_step", "triage.classifier", None, "root"),
            ("pipeline", "math_flow", "pipe", "root"),
            ("agent_step", "solver", "solve", "pipe"),
            ("function_step", "draft", "draft", "pipe"),
            ("parallel", "verify", "par", "pipe"),
            ("agent_step", "checker", "check", "par"),
            ("refinement_loop", "polish", "loop", "par"),
            ("agent_step", "refiner", "refine", "loop"),
            ("agent_step", "polish.evaluator", None, "loop"),
            ("agent_step", "refiner", "refine", "loop"),
            ("agent_step", "polish.evaluator", None, "loop"),
            ("function_step", "join", "join", "pipe"),
        ]
    )
    assert all(s.end_ns is not None and s.error is None for s in trace.spans)
    root = by_id[0]
    assert (root.kind, root.parent_id) == ("router", None)
    assert root.attributes == {
        "route": "math",
        "raw": "Math",
        "fallback": False,
        "reason": None,
        "error": None,
    }
    loop_span = next(s for s in trace.spans if s.kind == "refinement_loop")
    assert loop_span.attributes["exit_reason"] == "passed"
    assert loop_span.attributes["iterations"] == 2
    assert [h["score"] for h in loop_span.attributes["history"]] == [1.0, 2.0]
    par_span = next(s for s in trace.spans if s.kind == "parallel")
    assert par_span.attributes == {"errors": [None, None]}

    usage = {
        k: (u.requests, u.input_tokens, u.output_tokens) for k, u in trace.usage_by_model().items()
    }
    assert usage == {
        "function:classifier": (1, 5, 1),
        "function:solver": (1, 10, 4),
        "function:checker": (1, 3, 1),
        "function:refiner": (2, 12, 4),
        "function:judge": (2, 8, 2),
    }
    # usage sits on the agent's own span
    solver_span = next(s for s in trace.spans if s.name == "solver")
    assert [u.model_name for u in solver_span.usage] == ["function:solver"]
    assert by_id[0].usage == []


def test_nested_other_route() -> None:
    out, trace = _run(build(), "hello")
    assert out == "HELLO"
    assert [(s.kind, s.name) for s in trace.spans] == [
        ("router", "triage"),
        ("agent_step", "triage.classifier"),
        ("function_step", "chat"),
    ]
    assert list(trace.usage_by_model()) == ["function:classifier"]
