"""A small own problem of the kind a new user brings (a classification task, not GSM8K): support
tickets, eight labels, five FunctionModel agents (three cheap, one mid, one dear), `exact` scoring,
no function registered.

Every agent answers from a table (ticket text -> label) and each call is billed 1,000 input
tokens, so a call of agent A costs exactly `PRICES[A]` USD. A judge question ("Is this answer
correct ...") is answered "no" by every agent; a revision prompt gets the agent's own label.
"""

from __future__ import annotations

import json
from pathlib import Path

LABELS = ("billing", "bug", "login", "refund", "shipping", "account", "feature", "other")

PRICES = {"cheap_a": 0.001, "cheap_b": 0.002, "cheap_c": 0.003, "mid": 0.01, "dear": 0.1}
"""USD per call (1,000 input tokens at `input_usd_per_1k`)."""

N_VALIDATION = 20
N_EASY = 12
"""Validation tickets 0..11 are easy: cheap_a and cheap_b both answer them right (and agree);
on 12..19 they give two different wrong labels (they disagree)."""


def tickets() -> list[tuple[str, str]]:
    """(text, gold label) of the 24 tickets; the first `N_VALIDATION` are the validation set
    when the split is by order (the problem's `validation_size` with `split_key` = position)."""
    out: list[tuple[str, str]] = []
    for i in range(24):
        out.append((f"Ticket {i:02d}: my issue number {i} please help", LABELS[i % 8]))
    return out


def wrong(label: str, k: int) -> str:
    return LABELS[(LABELS.index(label) + k) % 8]


def answers() -> dict[str, dict[str, str]]:
    """agent -> ticket text -> the label it answers.

    - dear: always right;
    - mid: right but on tickets 12..15 (wrong: label + 3);
    - cheap_a: right on 0..11 and on 20..23, else label + 1;
    - cheap_b: right on 0..11 and on 20..23, else label + 2;
    - cheap_c: right on 0..5 and 12..15, else label + 1 (agrees with cheap_a's mistakes on
      16..19, none on 12..15).
    """
    table: dict[str, dict[str, str]] = {a: {} for a in PRICES}
    for i, (text, gold) in enumerate(tickets()):
        table["dear"][text] = gold
        table["mid"][text] = wrong(gold, 3) if 12 <= i < 16 else gold
        easy = i < N_EASY or i >= N_VALIDATION
        table["cheap_a"][text] = gold if easy else wrong(gold, 1)
        table["cheap_b"][text] = gold if easy else wrong(gold, 2)
        table["cheap_c"][text] = gold if (i < 6 or 12 <= i < 16) else wrong(gold, 1)
    return table


REGISTRIES = """
import json
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts

HERE = Path(__file__).parent
TABLE = json.loads((HERE / "answers.json").read_text())


def answerer(agent):
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(getattr(messages[-1].parts[-1], "content", ""))
        if "Is this answer correct" in prompt:
            text = "no"
        else:
            key = prompt.split("\\n\\nA previous answer was:")[0]
            text = TABLE[agent].get(key, "")
        return ModelResponse(
            parts=[TextPart(text)], usage=RequestUsage(input_tokens=1000, output_tokens=0)
        )

    respond.__name__ = agent
    return respond


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    for name in TABLE:
        agents.register(name, Agent(FunctionModel(answerer(name)), name=name), f"{name} agent")
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(str(output).strip() == ex.expected)},
    )
"""


def write_problem(root: Path, *, search: str = "") -> Path:
    """Write the problem into `root/tickets` and return that directory."""
    d = root / "tickets"
    d.mkdir(parents=True)
    (d / "answers.json").write_text(json.dumps(answers()))
    (d / "registries.py").write_text(REGISTRIES)
    gold = [
        json.dumps({"id": f"t{i:02d}", "input": text, "expected": label})
        for i, (text, label) in enumerate(tickets())
    ]
    (d / "gold.jsonl").write_text("\n".join(gold) + "\n")
    (d / "seed.json").write_text(
        json.dumps(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "agent_step", "agent_name": "mid"}}],
            }
        )
    )
    prices = "\n".join(
        f'[models.prices."function:{a}:"]\ninput_usd_per_1k = {p}\noutput_usd_per_1k = 0.0\n'
        for a, p in PRICES.items()
    )
    (d / "problem.toml").write_text(
        f"""name = "tickets"
description = "Label support tickets."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = {N_VALIDATION}

[search]
seed = 1
{search}

[models]
time_scale = 0
# in-process FunctionModel agents record no model time: 0 ms, not the wall time (which the
# machine's load decides), so the search's choices are the same on every run
latency_source = "model"
{prices}"""
    )
    return d
