"""Benchmark: the meta orchestrator's overhead per subtask, and BubblewrapSandbox's start-up.

The figures asked of the autonomy layer (orchestration overhead beyond the model calls, and the
sandbox's cost per call):

1. A 5-subtask `MetaOrchestrator.solve` on function models (`core.autonomy.testing`: a scripted
   planner, specialists answering at once), no memory, no hooks. Every model request is timed
   (a `FunctionModel` whose `request` adds its wall time to a counter), so the solve's wall
   time splits into model requests and everything else: decomposition handling, the
   specialist's spec validated and its output model built, the factory's spawn, pydantic-ai's
   own run machinery, prompts, pricing and the result. The overhead per subtask is
   (solve wall - model request time) / 5, in ms; median of `--repeats` solves after a warm-up.
   pydantic-ai's share is measured apart (a bare structured-output run on the same function
   model, less its request) and subtracted for the orchestrator's own figure.
2. `BubblewrapSandbox.execute` of a trivial generated tool (`return 1`): one fresh sandbox
   (bwrap, namespaces, the system interpreter started with `-I -S`, rlimits, JSON in and out)
   per call, median ms over `--calls`, beside the same interpreter started without bwrap.

Run: `python bench/bench_autonomy.py [--repeats N] [--calls N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.settings import ModelSettings

from core.agents import BaseAgent
from core.autonomy import (
    AgentFactory,
    BubblewrapSandbox,
    MetaOrchestrator,
    SubTask,
    TaskDecomposition,
    ToolRegistry,
)
from core.autonomy.testing import planner_model, specialist_model
from core.ir import GeneratedToolSpec

MODEL_SECONDS = [0.0]


class TimedModel(FunctionModel):
    """A `FunctionModel` that adds each request's wall time to `MODEL_SECONDS`."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        start = time.perf_counter()
        try:
            return await super().request(messages, model_settings, model_request_parameters)
        finally:
            MODEL_SECONDS[0] += time.perf_counter() - start


def _timed(model: FunctionModel) -> TimedModel:
    fn: Any = model.function
    return TimedModel(fn, model_name=model.model_name.split(":", 1)[-1])


def _orchestrator() -> MetaOrchestrator:
    plan = TaskDecomposition(
        subtasks=[SubTask(name=f"step{i}", description=f"part {i} of the goal") for i in range(5)]
    )
    planner = BaseAgent("planner", model=_timed(planner_model([plan])))
    return MetaOrchestrator(
        planner,
        AgentFactory(ToolRegistry(), default_model="test"),
        spawn_model=_timed(specialist_model()),
    )


def bench_solve(repeats: int) -> tuple[float, float, float]:
    """(wall ms per solve, model ms per solve, overhead ms per subtask), medians."""
    orch = _orchestrator()
    asyncio.run(orch.solve("warm up"))
    walls: list[float] = []
    models: list[float] = []
    for _ in range(repeats):
        MODEL_SECONDS[0] = 0.0
        start = time.perf_counter()
        result = asyncio.run(orch.solve("a five part goal"))
        walls.append((time.perf_counter() - start) * 1000)
        models.append(MODEL_SECONDS[0] * 1000)
        assert result.success and len(result.subtask_results) == 5
    overheads = [(w - m) / 5 for w, m in zip(walls, models, strict=True)]
    return statistics.median(walls), statistics.median(models), statistics.median(overheads)


def bench_bare_runs(runs: int) -> float:
    """Wall ms of one bare pydantic-ai run beyond its model request (structured output on a
    function model, like the specialists'), median: pydantic-ai's own machinery."""
    from pydantic_ai import Agent

    from core.autonomy.testing import ANSWER_SCHEMA
    from core.ir import schema_to_type

    agent = Agent(_timed(specialist_model()), output_type=schema_to_type(ANSWER_SCHEMA))

    async def go() -> list[float]:
        out: list[float] = []
        await agent.run("Subtask warm: up")
        for _ in range(runs):
            MODEL_SECONDS[0] = 0.0
            start = time.perf_counter()
            await agent.run("Subtask x: y")
            out.append((time.perf_counter() - start - MODEL_SECONDS[0]) * 1000)
        return out

    return statistics.median(asyncio.run(go()))


def bench_sandbox(calls: int) -> tuple[float, float]:
    """(ms per sandboxed call, ms per bare interpreter start), medians."""
    sandbox = BubblewrapSandbox()
    sandbox.check_available()
    spec = GeneratedToolSpec(name="one", implementation="return 1")
    times: list[float] = []
    for _ in range(calls):
        result = asyncio.run(sandbox.execute(spec, {}))
        assert result.ok and result.value == 1, result.error
        times.append(result.duration_ms)
    bare: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run([sandbox.python, "-I", "-S", "-c", "pass"], check=True)
        bare.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.median(bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    wall, model, overhead = bench_solve(args.repeats)
    print(
        f"5-subtask solve on function models: {wall:.1f} ms per solve, of which model requests "
        f"{model:.1f} ms; orchestration overhead {overhead:.2f} ms per subtask "
        f"(median of {args.repeats})"
    )
    machinery = bench_bare_runs(50)
    # a solve makes 11 pydantic-ai runs: 1 decomposition, then per subtask a design and a run
    own = overhead - machinery * 11 / 5
    print(
        f"  of which pydantic-ai's own run machinery: {machinery:.2f} ms per run beyond its "
        f"model request, x 11 runs / 5 subtasks = {machinery * 11 / 5:.2f} ms per subtask; "
        f"the orchestrator's own work (specs, spawn, prompts, pricing): {own:.2f} ms per subtask"
    )
    sandboxed, bare = bench_sandbox(args.calls)
    print(
        f"BubblewrapSandbox start-up: {sandboxed:.1f} ms per call (a fresh sandbox each call; "
        f"the bare interpreter starts in {bare:.1f} ms; median of {args.calls})"
    )


if __name__ == "__main__":
    main()
