"""A problem declared in its TOML alone: agents under `[agents.<name>]`, no `registries.py`.

`core.problems.load_problem` builds a problem's parts here when its `problem.toml` declares
`[agents.<name>]` tables and its directory has no `registries` file (`registries.py` by
default); with the file, the module's `build(ctx)` is used as before. `topology-studio init`
writes such problems (`core.problems.replay_file.write_problem_dir`):

```toml
name = "tickets"
score_function = "exact"

[gold]
source = "jsonl"                     # a declared problem's gold set is always a file
path = "gold.jsonl"
validation_size = 300

[agents.cheap]
model = "openai:gpt-4o-mini"         # a pydantic-ai model id
description = "Small and fast."      # optional: one line for the designer (default: the model)
instructions = "Answer with the label only."   # optional
output = "text"                      # or "object" (a JSON object, dict)

[agents.logged]
model = "replay:logged"              # the recorded outputs of agent `logged` in [replay] path

[replay]
path = "replay.jsonl"                # core.problems.replay_file documents the lines
```

What each model id becomes, checked at load, one line each when it cannot be used:

- `"replay:<agent>"`: a `core.agents.replay.TableReplayModel` answering, on the exact prompt of
  a gold example's input (`core.agents.render_prompt`), what `<agent>` recorded on that
  example, with its recorded tokens and latency (needs `[replay]`; an agent the file does not
  record is refused);
- `"function:<name>"`: the `FunctionModel` this process registered under that id
  (`core.agents.local_models`; none registered: refused);
- anything else: pydantic-ai's `infer_model(id)`: an unknown id, a provider whose package is
  missing, or a missing key or address (e.g. `OPENAI_API_KEY`) is refused with pydantic-ai's own
  message, naming the field `agents.<name>.model`.

The standard library of combinators (`core.combinators`) is registered as for every problem,
with judges and critics (`judge_by_<agent>`) only from the agents that are not replayed.

Every model then needs a price (`core.problems._prices`): `[models.prices."<model>"]`, or
genai-prices for a hosted model.

The one score function, `exact`: 1.0 when the output equals `expected` after normalisation,
else 0.0. Text is compared stripped and case-folded (`" Billing\\n"` equals `"billing"`); a JSON
object `expected` matches an object output holding each of its fields with an equal
(normalised) value, other fields ignored (`{"label": "refund"}` matches
`{"label": "Refund", "why": "..."}`); anything else is compared as JSON. An output of another
type than `expected` (text against an object) scores 0.0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model

from core.agents import render_prompt
from core.agents.local_models import local_model
from core.agents.replay import RecordedCall, TableReplayModel
from core.errors import ProblemError
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems.config import AgentConfig
from core.problems.parts import ProblemContext, ProblemParts
from core.problems.replay_file import ReplayTable, read_replay_file

__all__ = ["SCORE_FUNCTIONS", "declared_parts", "resolve_model_id", "score_exact"]

REPLAY_MODEL_PREFIX = "replay:"
FUNCTION_MODEL_PREFIX = "function:"


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().casefold()
    return value


def _matches(output: Any, expected: Any) -> bool:
    if isinstance(expected, str):
        return isinstance(output, str) and _normal(output) == _normal(expected)
    if isinstance(expected, Mapping):
        if not isinstance(output, Mapping):
            return False
        out_map: Mapping[Any, Any] = output  # pyright: ignore[reportUnknownVariableType]
        exp_map: Mapping[Any, Any] = expected  # pyright: ignore[reportUnknownVariableType]
        return all(k in out_map and _matches(out_map[k], v) for k, v in exp_map.items())
    try:
        return json.dumps(output, sort_keys=True) == json.dumps(expected, sort_keys=True)
    except (TypeError, ValueError):
        return False


def score_exact(output: Any, example: GoldExample) -> float:
    """1.0 when `output` matches `example.expected` (the rule is in the module docstring)."""
    return 1.0 if _matches(output, example.expected) else 0.0


SCORE_FUNCTIONS = {"exact": score_exact}
"""The score functions of a declared problem, by the name `score_function` gives."""


def _field_error(ctx: ProblemContext, name: str, message: str) -> ProblemError:
    return ProblemError(message, file=str(ctx.toml_path), field=f"agents.{name}.model")


def _replay_model(
    ctx: ProblemContext,
    name: str,
    recorded: str,
    table: ReplayTable | None,
    prompts: Mapping[str, str],
) -> TableReplayModel:
    if table is None or ctx.config.replay is None:
        raise _field_error(
            ctx, name, f"model 'replay:{recorded}' needs a [replay] table with the file's path"
        )
    if recorded not in table.structured:
        raise _field_error(
            ctx,
            name,
            f"{ctx.config.replay.path} records no agent {recorded!r} (it records "
            + ", ".join(table.agents)
            + ")",
        )
    calls = {
        prompts[ex_id]: RecordedCall(
            response=line.output,
            input_tokens=line.input_tokens,
            output_tokens=line.output_tokens,
            latency_ms=line.latency_ms,
        )
        for ex_id, line in table.recordings(recorded).items()
    }
    return TableReplayModel(
        recorded, calls, time_scale=ctx.time_scale, race_clock=ctx.config.replay.race_clock
    )


def _model(
    ctx: ProblemContext,
    name: str,
    decl: AgentConfig,
    table: ReplayTable | None,
    prompts: Mapping[str, str],
) -> Model:
    if decl.model.startswith(REPLAY_MODEL_PREFIX):
        recorded = decl.model.removeprefix(REPLAY_MODEL_PREFIX)
        return _replay_model(ctx, name, recorded, table, prompts)
    try:
        return resolve_model_id(decl.model)
    except ValueError as exc:
        raise _field_error(ctx, name, str(exc)) from exc


def resolve_model_id(model_id: str) -> Model:
    """The model a `"function:<name>"` or pydantic-ai model id names (not `"replay:..."`).

    Raises:
        ValueError: one line: no in-process model registered under a `function:` id, or
            pydantic-ai cannot make the model (an unknown id, a provider package not installed,
            a missing key or address such as `OPENAI_API_KEY`).
    """
    if model_id.startswith(FUNCTION_MODEL_PREFIX):
        model = local_model(model_id)
        if model is None:
            raise ValueError(
                f"no in-process model is registered as {model_id!r} (register a "
                "FunctionModel with core.agents.local_models.register_local_model first)"
            )
        return model
    try:
        return infer_model(model_id)
    except (UserError, ImportError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot use model {model_id!r}: {first}") from exc


def _prompts(gold: Sequence[GoldExample], ctx: ProblemContext) -> dict[str, str]:
    """Example id -> the prompt its input is sent as; two examples with one prompt are an error
    (a replay could not tell them apart)."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for ex in gold:
        prompt = render_prompt(ex.input)
        if prompt in seen:
            raise ProblemError(
                f"gold examples {seen[prompt]!r} and {ex.id!r} have the same input: a replayed "
                "model cannot tell them apart",
                file=str(ctx.toml_path),
                field="replay",
            )
        seen[prompt] = str(ex.id)
        out[str(ex.id)] = prompt
    return out


def declared_parts(ctx: ProblemContext, gold: Sequence[GoldExample]) -> ProblemParts:
    """The parts of a problem declared in its TOML (see the module docstring).

    Args:
        ctx: the problem's context (its validated config and directory).
        gold: the problem's gold examples (the `[gold]` file), which the replayed prompts are.

    Raises:
        ProblemError: a bad `[replay]` file (names the line and the field), or an agent whose
            model cannot be used (names `agents.<name>.model`).
    """
    config = ctx.config
    table: ReplayTable | None = None
    prompts: dict[str, str] = {}
    if config.replay is not None:
        path = ctx.root / config.replay.path
        if not path.is_file():
            raise ProblemError(
                f"file {config.replay.path!r} not found in {ctx.root}",
                file=str(ctx.toml_path),
                field="replay.path",
            )
        table = read_replay_file(path, [str(ex.id) for ex in gold])
        prompts = _prompts(gold, ctx)
    agents = AgentRegistry()
    for name, decl in config.agents.items():
        model = _model(ctx, name, decl, table, prompts)
        structured = decl.output == "object"
        if table is not None and decl.model.startswith(REPLAY_MODEL_PREFIX):
            structured = table.structured[decl.model.removeprefix(REPLAY_MODEL_PREFIX)]
        output_type: Any = dict[str, Any] if structured else str
        agent: Agent[None, Any] = Agent(
            model, output_type=output_type, instructions=decl.instructions, name=name
        )
        described = decl.description or (
            f"{decl.model.removeprefix(REPLAY_MODEL_PREFIX)}'s recorded outputs (replayed)"
            if decl.model.startswith(REPLAY_MODEL_PREFIX)
            else f"{decl.model}"
        )
        agents.register(name, agent, described)
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions=SCORE_FUNCTIONS,
        load_gold=lambda: list(gold),
        # a replayed agent answers only its recorded inputs, never a judge's question
        judges=tuple(
            name
            for name, decl in config.agents.items()
            if not decl.model.startswith(REPLAY_MODEL_PREFIX)
        ),
    )
