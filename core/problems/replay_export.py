"""Record once, search offline: a run's recorded model calls as a replay problem.

`export_replay(problem, cache, target)` looks up, for every agent the problem registers and every
gold example, the call an agent step makes when it runs that agent on the example's input (the
call cache key `core.agents.call_cache.call_key` of the registered agent, the prompt
`AgentStep.build_prompt(example.input)` and trial 0). Each call the cache holds becomes one line
of the replay format (`core.problems.replay_file`): the example's id, the agent's name, its
output exactly as recorded (the JSON the call returned), its tokens and its model time. The
problem written around them (`write_replay_problem`) names each agent `replay:<agent>`, prices it
per 1K tokens at what its recorded model cost (the problem's `Pricer`: genai-prices or its own
`[models.prices]`), and keeps the source problem's split: the same gold examples, validation
size and split salt, so the same examples are validation examples.

Only calls made on a gold example's own input are exportable (the replay format answers a
recorded input only): an agent that ran on another agent's output (the second step of a chain)
has no line, and a topology using it that way is an error offline. Searching the written
problem reproduces every recorded single-agent candidate's figures (accuracy, cost, latency),
and new combinations of the recorded agents cost no call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from core.agents.call_cache import CallCache, call_key
from core.errors import ProblemError
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.problems.problem import Problem
from core.problems.replay_file import ReplayLine, replay_table, write_replay_problem
from core.runtime.step import AgentStep
from core.runtime.tracing import ModelUsage

__all__ = ["export_replay", "recorded_lines"]


def recorded_lines(
    problem: Problem,
    cache: CallCache,
    examples: Sequence[GoldExample],
    latencies: Mapping[tuple[str, str], float] | None = None,
) -> tuple[list[ReplayLine], dict[str, str]]:
    """The recorded calls of `problem`'s agents on `examples` (see the module docstring).

    Args:
        latencies: `(agent, example id) -> ms` for calls that recorded no model time (a hosted
            model over HTTP records none: the run measured wall time), e.g. the example's latency
            in a single-agent candidate of the run; missing: 0 ms.

    Returns:
        The replay lines (agent by agent, examples in order), and each recorded agent's model
        as its calls recorded it (e.g. `{"small": "openai:gpt-4o-mini"}`).
    """
    lines: list[ReplayLine] = []
    models: dict[str, str] = {}
    for name in problem.agent_registry.names():
        step = AgentStep(problem.agent_registry.create(name), name=name)
        agent = step._agent  # pyright: ignore[reportPrivateUsage]
        for example in examples:
            if example.id is None:  # (a loaded problem's examples all have ids)
                continue
            key = call_key(agent, step.build_prompt(example.input), 0, name=name)
            record = None if key is None else cache.get(key)
            if record is None:
                continue
            decoded: Any = json.loads(record.output_json)
            output: str | dict[str, Any] = (
                cast("str | dict[str, Any]", decoded)
                if isinstance(decoded, str | dict)
                else record.output_json  # a number or a list: its JSON text
            )
            recorded_ms = record.model_latency_ms
            lines.append(
                ReplayLine(
                    id=example.id,
                    agent=name,
                    output=output,
                    input_tokens=sum(u[2] for u in record.usage),
                    output_tokens=sum(u[3] for u in record.usage),
                    latency_ms=(
                        recorded_ms
                        if recorded_ms is not None
                        else (latencies or {}).get((name, example.id), 0.0)
                    ),
                )
            )
            if record.usage:
                models.setdefault(name, record.usage[0][0])
    return lines, models


def _price(problem: Problem, model: str) -> ModelPrice:
    """`model`'s price per 1K input and output tokens under the problem's pricer."""
    pricer = Pricer(problem.prices)
    per_in = pricer.quote(ModelUsage(model, 0, 1000, 0))
    per_out = pricer.quote(ModelUsage(model, 0, 0, 1000))
    if per_in.reason is not None or per_out.reason is not None:
        raise ProblemError(f"model {model!r} has no price ({per_in.reason or per_out.reason})")
    if per_in.cost_usd == 0 and per_out.cost_usd == 0:
        return ModelPrice(free=True)
    return ModelPrice(input_usd_per_1k=per_in.cost_usd, output_usd_per_1k=per_out.cost_usd)


def export_replay(
    problem: Problem,
    cache: CallCache,
    target: str | Path,
    *,
    name: str,
    latencies: Mapping[tuple[str, str], float] | None = None,
    force: bool = False,
) -> tuple[Path, int]:
    """Write the replay problem of `problem`'s recorded calls to `target`.

    Args:
        problem: the problem the run searched (loaded as the run loaded it).
        cache: the run's call cache (`<db>.calls.duckdb`, the problem's namespace).
        target: the directory to write.
        name: the written problem's name.
        latencies: see `recorded_lines`.
        force: replace the problem files of an existing directory.

    Returns:
        The directory and the number of recorded calls written.

    Raises:
        ProblemError: no recorded call, a recorded model with no price, or what
            `write_replay_problem` raises (e.g. a non-empty directory without `force`).
    """
    gold = [ex for split in ("validation", "test") for ex in problem.splits.get(split, [])]
    lines, models = recorded_lines(problem, cache, gold, latencies)
    if not lines:
        raise ProblemError(
            f"the call cache holds no call of {problem.name}'s agents on its gold examples: "
            "export a run made with the call cache on (no --no-call-cache), on this --db"
        )
    prices = {agent: _price(problem, model) for agent, model in models.items()}
    for agent in {line.agent for line in lines} - set(prices):
        prices[agent] = ModelPrice(free=True)  # recorded with no usage: nothing to price
    root = write_replay_problem(
        target,
        name=name,
        gold=gold,
        replay=replay_table(lines),
        prices=prices,
        description=f"Replayed calls of {problem.name}: {problem.description}".strip(),
        force=force,
    )
    _keep_split(root / "problem.toml", problem)
    return root, len(lines)


def _keep_split(toml: Path, problem: Problem) -> None:
    """Give the written problem the source's validation size and split salt, so the same
    examples are validation examples (the writer picks half the examples, salt "")."""
    gold = problem.config.gold
    text = toml.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    for line in text:
        if line.startswith("validation_size = "):
            out.append(f"validation_size = {gold.validation_size}")
            out.append(f"split_salt = {json.dumps(gold.split_salt)}")
        else:
            out.append(line)
    toml.write_text("\n".join(out) + "\n", encoding="utf-8")
