"""Helpers for the example memo's tests with `fastest` races (the style of
tests/evaluation/test_example_memo.py): replayed agents answering their own name."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.agents.call_cache import CallCacheStats, InMemoryCallCache
from core.agents.replay import ReplayedCall, ReplayModel
from core.evaluation.evaluator import CandidateEvaluation, TopologyEvaluator
from core.evaluation.example_memo import MEMO_PREFIX
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry

models.ALLOW_MODEL_REQUESTS = False


class AnyReplay(ReplayModel):
    """A replayed model answering its own name to any prompt, in `latency_ms` of model time."""

    def __init__(self, name: str, latency_ms: float, time_scale: float = 0.0) -> None:
        super().__init__(name, time_scale=time_scale)
        self.latency_ms = latency_ms

    def replayed_call(self, prompt: str, /) -> ReplayedCall:
        name = self.replay_name
        return ReplayedCall(
            usage=RequestUsage(input_tokens=10, output_tokens=2),
            latency_ms=self.latency_ms,
            response=lambda: name,
        )


async def _async_echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("echo")])


def replayed(name: str, latency_ms: float, time_scale: float = 0.0) -> Agent[None, str]:
    return Agent(AnyReplay(name, latency_ms, time_scale), output_type=str, name=name)


def agent(name: str) -> dict[str, Any]:
    return {"kind": "agent_step", "agent_name": name}


def fn(name: str) -> dict[str, Any]:
    return {"kind": "function_step", "callable_name": name}


def pipe(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": s} for s in steps]}


def race(*steps: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "parallel", "steps": list(steps), "merge": "fastest"}
    if timeout is not None:
        out["timeout"] = timeout
    return out


def make_evaluator(
    agents: dict[str, Callable[[], Any]],
    callables: dict[str, Callable[..., Any]] | None = None,
    winner: str = "quick",
) -> TopologyEvaluator:
    reg = AgentRegistry()
    for name, factory in agents.items():
        reg.register(name, factory)
    calls = CallableRegistry()
    for name, f in (callables or {}).items():
        calls.register(name, f)
    return TopologyEvaluator(
        callable_registry=calls,
        agent_registry=reg,
        score_fn=lambda output, ex: float(output == winner),
        workers=1,
        latency_source="model",
        pricer=Pricer(
            {f"replay:{n}": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0) for n in agents}
        ),
    )


def evaluate(
    ev: TopologyEvaluator, cache: InMemoryCallCache, spec: Any, n: int = 4
) -> tuple[CandidateEvaluation, CallCacheStats]:
    cache.reset_stats()
    ev = ev.with_collaborators(call_cache=cache)
    exs = [GoldExample(input=i, expected="", id=f"ex{i}") for i in range(n)]
    return asyncio.run(ev.evaluate(spec, exs)), cache.stats()


def memo_keys(cache: InMemoryCallCache) -> list[str]:
    return [k for k, _ in cache.records() if k.startswith(MEMO_PREFIX)]


def without_memo(cache: InMemoryCallCache) -> InMemoryCallCache:
    return InMemoryCallCache({k: r for k, r in cache.records() if not k.startswith(MEMO_PREFIX)})


def echo_agent() -> Agent[None, str]:
    """A plain (not replayed) pydantic-ai FunctionModel agent, async, always answering "echo"."""
    return Agent(FunctionModel(_async_echo, model_name="echo"), output_type=str, name="echo")


def outputs(ev: CandidateEvaluation) -> list[str | None]:
    return [r.output_summary for r in ev.results]
