"""A problem whose agents are hosted OpenAI models, and the server's script that answers it.

`write_hosted(root, n)` writes `hosted/` (n examples "What is a + b?"; agents `small`
= `openai-chat:gpt-4o-mini`, `large` = `openai-chat:gpt-4o`, both pydantic-ai agents built from
their names, so the base URL and key come from the environment as for any user's agents).
`answer` is the loopback server's script: an agent's request gets the sum (the small model
gets the examples whose first number is odd wrong, by one), a designer's request (one offering
the output tool) gets `DESIGN`, a design whose single step is the large model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.openai_server import OpenAIServer, Reply, output_tool

PROBLEM_TOML = """\
name = "hosted"
description = "Add the two numbers in the question, with hosted models."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = {validation}

[search]
max_evaluations = 2
minibatch_size = {validation}
concurrency = 1
meta_model = "openai-chat:gpt-4o-mini"
allowed_step_kinds = ["agent_step"]

[models]
time_scale = 0
backoff_s = 0.01
max_backoff_s = 0.05
max_wait_s = 0.5
timeout_s = 2.0
"""

REGISTRIES = """\
from pydantic_ai import Agent

from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    agents.register("small", lambda: Agent("openai-chat:gpt-4o-mini", name="small"), "Cheap.")
    agents.register("large", lambda: Agent("openai-chat:gpt-4o", name="large"), "Accurate.")
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(str(output).strip() == ex.expected)},
    )
"""

SEED = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "small"}}]}

DESIGN: dict[str, Any] = {
    "thought": "the large model adds better",
    "spec": {
        "kind": "pipeline",
        "id": "large",
        "name": "large",
        "steps": [{"operation": {"kind": "agent_step", "id": "add", "agent_name": "large"}}],
    },
}

TOKENS = {"gpt-4o-mini": (100, 20), "gpt-4o": (120, 30)}
"""Usage per answer, by model: (input, output) tokens."""


def write_hosted(root: Path, n: int = 5, validation: int = 4) -> Path:
    """Write the problem under `root / "hosted"` with `n` examples, `validation` of them in
    the validation split; return its folder."""
    folder = root / "hosted"
    folder.mkdir(parents=True, exist_ok=True)
    size = validation
    (folder / "problem.toml").write_text(PROBLEM_TOML.format(validation=size))
    (folder / "registries.py").write_text(REGISTRIES)
    (folder / "seed.json").write_text(json.dumps(SEED))
    lines = [
        json.dumps({"id": f"q{i}", "input": f"What is {i} + {2 * i}?", "expected": str(3 * i)})
        for i in range(1, n + 1)
    ]
    (folder / "gold.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def answer(body: dict[str, Any]) -> Reply:
    """The server's script for this problem (see the module docstring)."""
    model = str(body.get("model"))
    if output_tool(body) is not None:
        return Reply(tool_args=DESIGN, input_tokens=900, output_tokens=80)
    text = ""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            text = str(message.get("content"))
    numbers = [int(x) for x in re.findall(r"-?[0-9]+", text)[:2]]
    if len(numbers) < 2:  # another candidate's prompt (e.g. a vote over answers)
        return Reply(content="0")
    a, b = numbers
    wrong = model == "gpt-4o-mini" and a % 2 == 1
    tokens_in, tokens_out = TOKENS.get(model, (100, 20))
    return Reply(
        content=str(a + b + (1 if wrong else 0)),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
    )


PLAN = {
    "subtasks": [
        {"name": "haiku", "description": "write a haiku"},
        {"name": "count", "description": "count its words"},
    ],
    "reasoning": "two steps",
}


def solve_answer(body: dict[str, Any]) -> Reply:
    """The server's script for `solve "write a haiku and count its words"`: the plan (two
    subtasks), one specialist spec per subtask (named after it), and each specialist's text."""
    tool = output_tool(body)
    if tool is None:
        return Reply(content="done", input_tokens=50, output_tokens=10)
    params = next(t for t in body["tools"] if t["function"]["name"] == tool)["function"]
    if "subtasks" in params["parameters"]["properties"]:
        return Reply(tool_args=PLAN, input_tokens=300, output_tokens=60)
    user = ""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            user = str(message.get("content"))
    name = "haiku" if "Subtask: haiku" in user else "count"
    return Reply(
        tool_args={
            "name": f"{name}_writer",
            "system_prompt": f"You {name}.",
            "output_schema": {"type": "string"},
        },
        input_tokens=400,
        output_tokens=40,
    )


def use_hosted(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: OpenAIServer,
    *,
    n: int = 5,
    validation: int = 4,
) -> Path:
    """The problem written in `root` (the working folder), `server` answering it (`answer`),
    its URL and a key in the environment, the run store and cache under `root`; its folder."""
    folder = write_hosted(root, n=n, validation=validation)
    server.script(answer)
    monkeypatch.chdir(root)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(root / "runs.duckdb"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(root / "cache"))
    return folder


def kv(text: str, key: str) -> str:
    """The value printed after `key:` in a command's key-value summary."""
    found = re.search(rf"^{key}:\s+(.*)$", text, re.M)
    assert found is not None, text
    return found.group(1)
