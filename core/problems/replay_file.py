"""The recorded-outputs file of a replay problem, and the problem directory written around it.

A team's logged model outputs become an offline replay problem (like `gsm8k_replay`, with no
key and no network): `topology-studio init NAME --gold gold.jsonl --replay replay.jsonl`, or
`write_replay_problem(...)` from code (`export RUN --replay DIR` writes the same files).

## The replay file: one JSON object a line

```json
{"id": "t-0007", "agent": "cheap", "output": "billing", "input_tokens": 212, "output_tokens": 3, "latency_ms": 410.5}
{"id": "t-0007", "agent": "dear", "output": {"label": "refund", "why": "..."}, "input_tokens": 212, "output_tokens": 40, "latency_ms": 2300}
```

- `id` (string): the gold example the output was recorded on (an `id` of the gold file);
- `agent` (string, `[A-Za-z0-9_.-]`): who answered; each agent becomes a problem agent of that
  name whose model is `"replay:<agent>"`;
- `output` (string or JSON object): what it answered; one agent's outputs are all text or all
  objects (its agent's output type is then `str` or `dict`);
- `input_tokens`, `output_tokens` (whole numbers >= 0): the call's recorded usage, priced with
  `[models.prices."replay:<agent>"]` (USD per 1K tokens) or declared free;
- `latency_ms` (number >= 0): the call's recorded latency, replayed as model time
  (`core.agents.replay`: a `fastest` race goes to the faster recording).

Blank lines are skipped; any other key is an error. One (id, agent) pair is recorded once. An
example an agent has no line for is an error of that agent's run on it (never a guess). A
replayed agent answers only the recorded inputs: asked anything else (e.g. another agent's
output in a chain), its run is an error.

A bad line is one `ProblemError`, naming the file, the line and the first bad field, e.g.
`replay.jsonl line 7: field 'output_tokens': Input should be greater than or equal to 0 (got
-3)`. The gold file is read the same way (`read_gold_file`: `{"id", "input", "expected"}`
lines, and optionally `rubric` and `weight`).

## The problem directory

`write_problem_dir` writes `problem.toml` (the agents under `[agents.<name>]`, the prices under
`[models.prices."<model>"]`, `[replay] path` when there are recordings), `gold.jsonl`,
`replay.jsonl` (the recordings, one normalised line each) and `seed.json` (the cheapest agent
alone). `core.problems.declared` loads it with no `registries.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from core.errors import ProblemError
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice
from core.problems._errors import field_name

__all__ = [
    "GOLD_FILE",
    "REPLAY_FILE",
    "ReplayLine",
    "ReplayTable",
    "read_gold_file",
    "read_replay_file",
    "replay_table",
    "write_problem_dir",
    "write_replay_problem",
]

REPLAY_FILE: Final = "replay.jsonl"
"""The replay file's name in a written problem directory."""
GOLD_FILE: Final = "gold.jsonl"
"""The gold file's name in a written problem directory."""
_WRITTEN = ("problem.toml", GOLD_FILE, REPLAY_FILE, "seed.json")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_MAX_SHOWN = 60

_M = TypeVar("_M", bound=BaseModel)


class ReplayLine(BaseModel):
    """One line of a replay file (see the module docstring)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
    )

    id: StrictStr = Field(min_length=1)
    """The gold example's id."""
    agent: StrictStr
    """The agent that answered (`[A-Za-z0-9_.-]`)."""
    output: StrictStr | dict[str, Any]
    """What it answered: text or a JSON object."""
    input_tokens: int = Field(ge=0, strict=True)
    """Recorded input tokens."""
    output_tokens: int = Field(ge=0, strict=True)
    """Recorded output tokens."""
    latency_ms: float = Field(ge=0)
    """Recorded latency, ms."""

    @field_validator("agent")
    @classmethod
    def _check_agent(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("an agent name starts with a letter or digit and uses [A-Za-z0-9_.-]")
        return v

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _a_number(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError("must be a number")
        return v


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"


def _line_error(path: Path, n: int, field: str | None, message: str) -> ProblemError:
    return ProblemError(message, file=f"{path} line {n}", field=field)


def _first_error(exc: ValidationError, path: Path, n: int) -> ProblemError:
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field (not part of the format; check the spelling)"
    elif err["type"] != "missing":
        msg += f" (got {_shown(err.get('input'))})"
    # a union's member name (`output.str`, `output.dict[str,any]`) is no field of the line
    return _line_error(path, n, field_name(loc[:1]) or None, msg)


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(line number, object)` of every non-blank line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read: {exc}", file=str(path)) from exc
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _line_error(path, n, None, f"not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise _line_error(path, n, None, "each line must be a JSON object")
        yield n, obj  # pyright: ignore[reportUnknownArgumentType]


def _read_models(path: Path, model: type[_M]) -> list[tuple[int, _M]]:
    out: list[tuple[int, _M]] = []
    for n, obj in _json_lines(path):
        try:
            out.append((n, model.model_validate(obj)))
        except ValidationError as exc:
            raise _first_error(exc, path, n) from exc
    return out


def read_gold_file(path: str | Path) -> list[GoldExample]:
    """The gold examples of a JSON-lines file (`{"id", "input", "expected"}`, optionally
    `rubric` and `weight`), in file order.

    Raises:
        ProblemError: a bad line (names the file, the line and the field), an example without
            an id, an id used twice, or an empty file.
    """
    path = Path(path)
    seen: dict[str, int] = {}
    out: list[GoldExample] = []
    for n, ex in _read_models(path, GoldExample):
        if not isinstance(ex.id, str) or not ex.id:
            raise _line_error(path, n, "id", "every example needs a non-empty string id")
        if ex.id in seen:
            raise _line_error(
                path, n, "id", f"id {ex.id!r} is used twice (first at line {seen[ex.id]})"
            )
        seen[ex.id] = n
        out.append(ex)
    if not out:
        raise ProblemError("no gold examples (one JSON object a line)", file=str(path))
    return out


@dataclass(frozen=True, slots=True)
class ReplayTable:
    """A checked replay file.

    Attributes:
        lines: every recording, in file order.
        agents: the agents, in order of first appearance.
        structured: agent -> whether its outputs are JSON objects (else text).
    """

    lines: tuple[ReplayLine, ...]
    agents: tuple[str, ...]
    structured: Mapping[str, bool]

    def recordings(self, agent: str) -> dict[str, ReplayLine]:
        """Example id -> the agent's recording on it."""
        return {line.id: line for line in self.lines if line.agent == agent}


def read_replay_file(path: str | Path, gold_ids: Sequence[str] | None = None) -> ReplayTable:
    """Read and check a replay file (the format is in the module docstring).

    Args:
        path: the JSON-lines file.
        gold_ids: the gold set's ids, when known: a line naming another id is an error.

    Raises:
        ProblemError: the first bad line, naming the file, the line and the field.
    """
    path = Path(path)
    known = None if gold_ids is None else set(gold_ids)
    first: dict[tuple[str, str], int] = {}
    kind: dict[str, tuple[bool, int]] = {}
    lines: list[ReplayLine] = []
    for n, line in _read_models(path, ReplayLine):
        if known is not None and line.id not in known:
            raise _line_error(path, n, "id", f"no gold example has the id {line.id!r}")
        key = (line.id, line.agent)
        if key in first:
            raise _line_error(
                path,
                n,
                "agent",
                f"agent {line.agent!r} is recorded on {line.id!r} twice (first at line "
                f"{first[key]})",
            )
        first[key] = n
        structured = isinstance(line.output, dict)
        was = kind.setdefault(line.agent, (structured, n))
        if was[0] != structured:
            said = "a JSON object" if was[0] else "text"
            raise _line_error(
                path,
                n,
                "output",
                f"agent {line.agent!r} answered {said} at line {was[1]}: one agent's outputs "
                "are all text or all JSON objects",
            )
        lines.append(line)
    if not lines:
        raise ProblemError("no recordings (one JSON object a line)", file=str(path))
    agents = tuple(dict.fromkeys(line.agent for line in lines))
    return ReplayTable(tuple(lines), agents, {a: kind[a][0] for a in agents})


def replay_table(lines: Sequence[ReplayLine]) -> ReplayTable:
    """A `ReplayTable` of lines already validated (e.g. a run's recorded calls).

    Raises:
        ValueError: an (id, agent) pair twice, or an agent with both text and object outputs.
    """
    seen: set[tuple[str, str]] = set()
    structured: dict[str, bool] = {}
    for line in lines:
        if (line.id, line.agent) in seen:
            raise ValueError(f"agent {line.agent!r} is recorded on {line.id!r} twice")
        seen.add((line.id, line.agent))
        if structured.setdefault(line.agent, isinstance(line.output, dict)) != isinstance(
            line.output, dict
        ):
            raise ValueError(f"agent {line.agent!r} answers both text and JSON objects")
    agents = tuple(dict.fromkeys(line.agent for line in lines))
    return ReplayTable(tuple(lines), agents, structured)


# ---- writing ----------------------------------------------------------------------------------


def _toml_str(text: str) -> str:
    # a JSON string is a TOML basic string (json.dumps escapes \, ", control characters)
    return json.dumps(text, ensure_ascii=False)


def _toml_key(name: str) -> str:
    """A bare TOML key when the name is one (letters, digits, `_`, `-`), else quoted."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_str(name)


def _price_lines(model: str, price: ModelPrice) -> list[str]:
    out = ["", f"[models.prices.{_toml_str(model)}]"]
    if price.free:
        out.append("free = true")
    else:
        out.append(f"input_usd_per_1k = {price.input_usd_per_1k!r}")
        out.append(f"output_usd_per_1k = {price.output_usd_per_1k!r}")
    return out


def _price_per_token(price: ModelPrice | None) -> float:
    if price is None or price.free:
        return 0.0
    return float(price.input_usd_per_1k or 0.0) + float(price.output_usd_per_1k or 0.0)


def _gold_line(ex: GoldExample) -> str:
    obj: dict[str, Any] = {"id": ex.id, "input": ex.input, "expected": ex.expected}
    if ex.rubric is not None:
        obj["rubric"] = ex.rubric
    if ex.weight != 1.0:
        obj["weight"] = ex.weight
    return json.dumps(obj, ensure_ascii=False)


def _describe(name: str, gold: Sequence[GoldExample], agents: Mapping[str, str]) -> str:
    return f"{name}: {len(gold)} gold examples; agents " + ", ".join(
        f"{a} ({m})" for a, m in agents.items()
    )


def _validation_size(n: int) -> int:
    """Half the examples, at most 300, so the held-out test split is never empty."""
    return max(1, min(300, n // 2))


def write_problem_dir(
    target: str | Path,
    *,
    name: str,
    gold: Sequence[GoldExample],
    agents: Mapping[str, str],
    prices: Mapping[str, ModelPrice],
    replay: ReplayTable | None = None,
    description: str = "",
    force: bool = False,
) -> Path:
    """Write a problem directory that `load_problem` loads and `search` searches at once.

    Args:
        target: the directory to create.
        name: the problem's name (`[A-Za-z0-9_.-]`).
        gold: the gold examples (each with a unique id; at least 2: a validation and a test
            split).
        agents: agent name -> model (`"openai:gpt-4o-mini"`, `"replay:<agent>"`, ...).
        prices: model -> its price per 1K tokens or free, written under `[models.prices]`
            (a model left out is priced by genai-prices at load).
        replay: the recordings the `"replay:<agent>"` models answer from.
        description: one paragraph for people and the meta agent.
        force: replace the problem files of an existing directory (other files are kept).

    Returns:
        The directory.

    Raises:
        ProblemError: the directory exists and is not empty (without `force`), a bad name, fewer
            than 2 gold examples, or no agent.
    """
    root = Path(target)
    if not _NAME_RE.match(name):
        raise ProblemError(
            f"problem name {name!r} must start with a letter or digit and use only [A-Za-z0-9_.-]"
        )
    if root.exists() and (not root.is_dir() or any(root.iterdir())) and not force:
        raise ProblemError(
            f"{root} already exists and is not empty: choose another name, or pass --force to "
            "replace its problem files"
        )
    if len(gold) < 2:
        raise ProblemError(
            "a problem needs at least 2 gold examples (a validation and a test split)"
        )
    if not agents:
        raise ProblemError("a problem needs at least one agent")
    replayed = replay is not None and any(m.startswith("replay:") for m in agents.values())
    size = _validation_size(len(gold))
    cheapest = min(
        agents, key=lambda a: (_price_per_token(prices.get(agents[a])), list(agents).index(a))
    )
    text = [
        "# Written by `topology-studio init`. Every field: docs/own-problem.md",
        f"name = {_toml_str(name)}",
        f"description = {_toml_str(description or _describe(name, gold, agents))}",
        'score_function = "exact"',
        "",
        "[gold]",
        'source = "jsonl"',
        f"path = {_toml_str(GOLD_FILE)}",
        f"# the other {len(gold) - size} examples are the held-out test split",
        f"validation_size = {size}",
        "",
        "[search]",
        'strategy = "evolutionary"',
        "max_evaluations = 40",
        f"minibatch_size = {size if replayed else min(size, 20)}",
        'allowed_step_kinds = ["agent_step", "function_step", "pipeline", "parallel", "router"]',
        "max_depth = 4",
    ]
    if replayed:
        text += [
            "",
            "[models]",
            "# replayed latency is model time: nothing is slept, identical runs, identical latency",
            "time_scale = 0.0",
            'latency_source = "model"',
            "",
            "[replay]",
            f"path = {_toml_str(REPLAY_FILE)}",
        ]
    for agent, model in agents.items():
        text += ["", f"[agents.{_toml_key(agent)}]", f"model = {_toml_str(model)}"]
    for model in dict.fromkeys(agents.values()):
        if model in prices:
            text += _price_lines(model, prices[model])
    root.mkdir(parents=True, exist_ok=True)
    for stale in _WRITTEN:
        if (root / stale).is_file():
            (root / stale).unlink()
    (root / "problem.toml").write_text("\n".join(text) + "\n", encoding="utf-8")
    (root / GOLD_FILE).write_text("".join(_gold_line(ex) + "\n" for ex in gold), encoding="utf-8")
    if replay is not None:
        (root / REPLAY_FILE).write_text(
            "".join(
                json.dumps(line.model_dump(mode="json"), ensure_ascii=False) + "\n"
                for line in replay.lines
            ),
            encoding="utf-8",
        )
    seed = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": cheapest}}],
    }
    (root / "seed.json").write_text(json.dumps(seed, indent=2) + "\n", encoding="utf-8")
    return root


def write_replay_problem(
    target: str | Path,
    *,
    name: str,
    gold: Sequence[GoldExample],
    replay: ReplayTable,
    prices: Mapping[str, ModelPrice],
    description: str = "",
    force: bool = False,
) -> Path:
    """Write an offline replay problem: every recorded agent an agent of the problem
    (`[agents.<agent>] model = "replay:<agent>"`), priced per 1K tokens or free.

    Args:
        target: the directory to create.
        name: the problem's name.
        gold: the gold examples the recordings were made on.
        replay: the recordings (`read_replay_file` or `replay_table`).
        prices: agent name (not the model) -> its price; every recorded agent needs one.
        description: one paragraph for people and the meta agent.
        force: replace the problem files of an existing directory.

    Returns:
        The directory.

    Raises:
        ProblemError: an agent without a price, a recording on an id the gold set lacks, or
            what `write_problem_dir` raises.
    """
    missing = [a for a in replay.agents if a not in prices]
    if missing:
        raise ProblemError(
            f"no price for recorded agent(s) {', '.join(missing)}: give each USD per 1K input "
            "and output tokens, or declare it free"
        )
    ids = {ex.id for ex in gold}
    stray = next((line for line in replay.lines if line.id not in ids), None)
    if stray is not None:
        raise ProblemError(
            f"a recording of {stray.agent!r} names id {stray.id!r}, which no gold example has"
        )
    return write_problem_dir(
        target,
        name=name,
        gold=gold,
        agents={a: f"replay:{a}" for a in replay.agents},
        prices={f"replay:{a}": prices[a] for a in replay.agents},
        replay=replay,
        description=description,
        force=force,
    )
