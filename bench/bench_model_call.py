"""Minimal reproduction: CPU per pydantic-ai agent run on a `FunctionModel`, no project code.

The profile of the offline search that compared it with the reference library (Python 3.11)
measured 1.8 ms of CPU per structured-output function-model run on pydantic-ai 2.68
against 0.78 ms on 1.39. This script imports nothing of ours, so it runs unchanged in a venv
with any pydantic-ai release (`pip install pydantic-ai-slim==1.39.0`), which is how that
comparison is made: it prints the installed version and, per output mode, the median over
rounds of process CPU time per `agent.run`, in ms.

- `text`: `output_type=str`, the model answers with a `TextPart`.
- `structured`: `output_type=` a Pydantic model, the model answers with the output tool's
  `ToolCallPart` (the replay problem's mode).

Measured here on 2026-12-02 (2 cores shared with other work, so read the pairs, each run
back to back): pydantic-ai-slim 1.39.0 text 0.98 ms, structured 1.09 ms; 2.68.0 text 1.89 ms,
structured 2.49 ms. The same call costs about twice the CPU on 2.68, with no code of ours
involved; 1.107.10 and 2.0.0 were already near 2.68's figures, so the cost came within the 1.x
series (a finer bisection needs a quiet machine).

Usage: `python bench/bench_model_call.py [--runs N] [--rounds K]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from importlib.metadata import version

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


class Answer(BaseModel):
    question: str
    answer: float


async def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    payload = Answer(question="How many?", answer=18.0).model_dump_json()
    if info.output_tools:
        return ModelResponse(
            parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=payload)]
        )
    return ModelResponse(parts=[TextPart(content=payload)])


async def _cpu_ms_per_run(agent: Agent[None, object], runs: int, rounds: int) -> float:
    for _ in range(50):
        await agent.run("How many?")
    per_round: list[float] = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(runs):
            await agent.run("How many?")
        per_round.append((time.process_time() - start) / runs * 1000.0)
    return statistics.median(per_round)


async def _main(runs: int, rounds: int) -> None:
    model = FunctionModel(_respond)
    modes: dict[str, Agent[None, object]] = {
        "text": Agent(model, output_type=str),
        "structured": Agent(model, output_type=Answer),
    }
    print(f"pydantic-ai-slim {version('pydantic-ai-slim')}, {runs} runs x {rounds} rounds")
    for name, agent in modes.items():
        ms = await _cpu_ms_per_run(agent, runs, rounds)
        print(f"    {name:<11} {ms:.3f} ms CPU per agent.run (median of rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU per pydantic-ai agent run, FunctionModel")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(_main(args.runs, args.rounds))


if __name__ == "__main__":
    main()
