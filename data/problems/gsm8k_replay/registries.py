"""The GSM8K replay problem's entry point: `build(ctx) -> ProblemParts`.

Registers the four replay agents under the dataset's run names (`6b_finetuning`,
`6b_verification`, `175b_finetuning`, `175b_verification`) and the functions of `functions.py`,
each with a one-line description and its role(s); loads the gold set (the 1,319 GSM8K test
problems, input `MathState(question=...)`, expected the gold answer text, id
`gsm8k-test-<index:04d>`) and provides the score function `final_answer` (see `answers.py`).
The split hashes the question text (`split_key`), never the file order.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import EffectTable, NameEffect
from core.problems import ProblemContext, ProblemParts

from . import answers, arith, functions, replay, state
from .answers import is_blank, score_final_answer
from .functions import make_functions
from .replay import RUNS, ReplayData, ReplayParams, load_replay_data, make_replay_agent
from .state import MathState, coerce_state

__all__ = [
    "DATASET",
    "SOLUTIONS_FILE",
    "TEST_FILE",
    "answers",
    "arith",
    "build",
    "functions",
    "replay",
    "state",
]

DATASET = "gsm8k"
"""The dataset directory name under `[datasets]`."""
TEST_FILE = "test.jsonl"
"""GSM8K test problems with gold answers."""
SOLUTIONS_FILE = "example_model_solutions.jsonl"
"""The four recorded runs' solutions, same problems, same order."""


def gold_examples(data: ReplayData) -> list[GoldExample]:
    """One `GoldExample` per test problem, in file order."""
    return [
        GoldExample(input=MathState(question=it.question), expected=it.gold_answer, id=it.id)
        for it in data.items
    ]


def _question_of(example: GoldExample) -> str:
    value = example.input
    return value.question if isinstance(value, MathState) else str(value)


def _question_text(state: Any) -> str:
    """The question of a topology's state (never its candidates): what learned routers read."""
    return state.question if isinstance(state, MathState) else coerce_state(state).question


def build(ctx: ProblemContext) -> ProblemParts:
    """Build the problem's parts from its config (see the module docstring)."""
    params = ctx.params_as(ReplayParams)
    data = load_replay_data(
        ctx.dataset_file(DATASET, TEST_FILE), ctx.dataset_file(DATASET, SOLUTIONS_FILE)
    )

    agents = AgentRegistry()
    for run in RUNS:
        settings = params.runs[run]
        # One agent per run, shared by every topology hydrated from this registry: a
        # pydantic-ai Agent keeps no state between runs, and building one per hydration (its
        # output schema, toolsets) was 4% of a warm default search.
        agents.register(
            run,
            make_replay_agent(
                run,
                data,
                settings,
                chars_per_token=params.chars_per_token,
                time_scale=ctx.time_scale,
                race_clock=params.race_clock,
            ),
            settings.description,
        )

    callables = CallableRegistry()
    roles: dict[str, list[str]] = {}
    effects: dict[str, NameEffect] = {}
    for f in make_functions(params):
        callables.register(f.name, f.fn, f.description)
        for role in f.roles:
            roles.setdefault(role, []).append(f.name)
        if f.effect != NameEffect():
            effects[f.name] = f.effect

    return ProblemParts(
        callable_registry=callables,
        agent_registry=agents,
        score_functions={"final_answer": score_final_answer},
        load_gold=partial(gold_examples, data),
        split_key=_question_of,
        question_text=_question_text,
        roles=roles,
        is_blank=is_blank,
        # every answer comes from a replayed run: a topology of functions alone answers nothing
        effects=EffectTable(names=effects, answer_needs_agent=True),
    )
