"""A tiny problem with a train split, for learned routers: two FunctionModel agents, `cheap`
(USD 0.001 a call) right on the short questions only, `dear` (USD 0.01 a call) always right.

Question i is `"Question <i>: "` then `i % 8 + 1` words: questions with `i % 8 < 4` are short
(at most 4 words) and `cheap` answers them right; on the long ones it answers "wrong". 40
questions: 12 validation, 20 train, 8 test (`[gold] train_size = 20`, split by the hash of the
id), or no train split at all (`train=False`).
"""

from __future__ import annotations

import json
from pathlib import Path

PRICES = {"cheap": 0.001, "dear": 0.01}
"""USD per call (1,000 input tokens at `input_usd_per_1k`)."""

N_EXAMPLES = 40


def question(i: int) -> str:
    return f"Question {i:02d}: " + " ".join(["word"] * (i % 8 + 1))


def is_short(text: str) -> bool:
    """What `cheap` is right on: at most 4 words after the colon."""
    return len(text.split(":", 1)[1].split()) <= 4


REGISTRIES = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def answerer(agent):
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(getattr(messages[-1].parts[-1], "content", ""))
        words = len(prompt.split(":", 1)[-1].split())
        text = "right" if agent == "dear" or words <= 4 else "wrong"
        return ModelResponse(
            parts=[TextPart(text)], usage=RequestUsage(input_tokens=1000, output_tokens=0)
        )

    respond.__name__ = agent
    return respond


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    for name in ("cheap", "dear"):
        agents.register(name, Agent(FunctionModel(answerer(name)), name=name), f"{name} agent")
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(str(output).strip() == ex.expected)},
    )
"""


def write_problem(
    root: Path,
    *,
    train: bool = True,
    n: int = N_EXAMPLES,
    validation: int = 12,
    train_size: int = 20,
    workers: int = 1,
) -> Path:
    """Write the problem into `root/short_long` and return that directory: `n` questions,
    `validation` of them validation, `train_size` train (when `train`), the rest test; the
    search's evaluations use `workers` processes."""
    d = root / "short_long"
    d.mkdir(parents=True)
    (d / "registries.py").write_text(REGISTRIES)
    gold = [
        json.dumps({"id": f"q{i:02d}", "input": question(i), "expected": "right"}) for i in range(n)
    ]
    (d / "gold.jsonl").write_text("\n".join(gold) + "\n")
    (d / "seed.json").write_text(
        json.dumps(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "agent_step", "agent_name": "dear"}}],
            }
        )
    )
    prices = "\n".join(
        f'[models.prices."function:{a}:"]\ninput_usd_per_1k = {p}\noutput_usd_per_1k = 0.0\n'
        for a, p in PRICES.items()
    )
    train_line = f"train_size = {train_size}" if train else ""
    (d / "problem.toml").write_text(
        f"""name = "short_long"
description = "Answer right."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = {validation}
{train_line}

[search]
seed = 1
workers = {workers}

[models]
time_scale = 0
latency_source = "model"
{prices}"""
    )
    return d
