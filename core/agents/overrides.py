"""Prompt overrides: run an agent with another system prompt, without changing the agent.

A prompt override is addressed by a *target name* `"<agent>.<field>"`, e.g.
`"solver.system_prompt"` (the gene names of `core.optimization.PromptGene`): `<agent>` is the
name a topology uses for the agent (a registered agent's registry name, an inline `AgentSpec`'s
`name`) and `<field>` one of `PROMPT_FIELDS`. The hydrator applies them
(`core.hydrate.topology_from_spec(..., prompt_overrides=...)`):

- an inline `AgentSpec` is spawned from a copy whose `system_prompt` is the override (its
  `constraints` are still appended by the factory, as for any spec);
- a registered agent (a pydantic-ai agent or a `BaseAgent`) is wrapped in a
  `PromptOverrideAgent`, which runs it inside pydantic-ai's `Agent.override(instructions=...)`:
  the model sees the override as the run's instructions (what `BaseAgent` sends its
  `system_prompt` as) in place of the agent's own. The override is scoped to that run by a
  context variable, so the registered agent (possibly shared by every hydration) is never
  mutated and concurrent runs with different prompts do not interfere. Static `system_prompt=`
  parts given to a raw `pydantic_ai.Agent` are not instructions and stay as they are.

An agent that only quacks like one (`AgentLike` without pydantic-ai underneath) has no prompt to
override: `override_system_prompt` raises `TypeError` naming it.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic_ai.agent import AbstractAgent

from core.agents.base import BaseAgent

__all__ = [
    "PROMPT_FIELDS",
    "PromptOverrideAgent",
    "override_system_prompt",
    "parse_prompt_target",
]

PROMPT_FIELDS: tuple[str, ...] = ("system_prompt",)
"""The agent fields a prompt override may name (the part after the last dot)."""


def parse_prompt_target(name: str) -> tuple[str, str]:
    """Split a target name `"<agent>.<field>"` at its last dot.

    Args:
        name: e.g. `"solver.system_prompt"`; agent names may themselves contain dots.

    Returns:
        `(agent_name, field)`, e.g. `("solver", "system_prompt")`.

    Raises:
        ValueError: no dot, an empty agent name, or a field not in `PROMPT_FIELDS` (the
            message names `name` and the fields allowed).
    """
    agent, dot, field = name.rpartition(".")
    if not dot or not agent.strip() or field not in PROMPT_FIELDS:
        allowed = ", ".join(f"'<agent>.{f}'" for f in PROMPT_FIELDS)
        raise ValueError(f"prompt target {name!r} is not of the form {allowed}")
    return agent, field


class PromptOverrideAgent:
    """An agent run with another system prompt (see the module docstring).

    Args:
        agent: a pydantic-ai agent or a `BaseAgent`.
        system_prompt: the instructions the model sees instead of the agent's own.

    Raises:
        TypeError: `agent` is neither (it has no prompt to override).
    """

    def __init__(self, agent: Any, system_prompt: str) -> None:
        if not isinstance(agent, AbstractAgent | BaseAgent):
            raise TypeError(
                f"cannot override the system prompt of a {type(agent).__name__}: only "
                "pydantic-ai agents and BaseAgents have one"
            )
        self._inner: Any = agent
        self._system_prompt = system_prompt

    @property
    def inner(self) -> Any:
        """The wrapped agent (unchanged)."""
        return self._inner

    @property
    def system_prompt(self) -> str:
        """The overriding system prompt."""
        return self._system_prompt

    @property
    def model(self) -> Any:
        """The wrapped agent's configured model (names the model in recorded usage)."""
        return self._inner.model

    @property
    def name(self) -> str | None:
        """The wrapped agent's name (`agent_name` for a `BaseAgent`)."""
        inner: Any = self._inner
        if isinstance(inner, BaseAgent):
            return cast("BaseAgent[Any]", inner).agent_name
        return inner.name

    async def run(self, user_prompt: Any, /, **kwargs: Any) -> Any:
        """Run the wrapped agent once with the override; returns an object with `.output`.

        `kwargs` (e.g. `usage=`) go to the wrapped agent's `run` unchanged; whatever it raises
        propagates.
        """
        inner = self._inner
        if isinstance(inner, BaseAgent):
            base = cast("BaseAgent[Any]", inner)
            kwargs.pop("infer_name", None)
            with base.agent.override(instructions=self._system_prompt):
                output: Any = await base.run(user_prompt, **kwargs)
            return _Output(output)
        with inner.override(instructions=self._system_prompt):
            return await inner.run(user_prompt, **kwargs)

    def __repr__(self) -> str:
        return f"PromptOverrideAgent({self._inner!r}, system_prompt={self._system_prompt!r})"


class _Output:
    """A `BaseAgent` run's output as a pydantic-ai-like result (`.output`)."""

    __slots__ = ("output",)

    def __init__(self, output: Any) -> None:
        self.output = output


def override_system_prompt(agent: Any, system_prompt: str) -> PromptOverrideAgent:
    """`agent` run with `system_prompt` as its instructions (a `PromptOverrideAgent`).

    An agent that is already a `PromptOverrideAgent` is re-wrapped around its inner agent (the
    newest override wins).

    Raises:
        TypeError: `agent` is not a pydantic-ai agent or a `BaseAgent`.
    """
    if isinstance(agent, PromptOverrideAgent):
        agent = agent.inner
    return PromptOverrideAgent(agent, system_prompt)
