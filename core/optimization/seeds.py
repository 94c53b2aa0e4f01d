"""The seed prompts of a topology's agents: phase 2's starting genome.

`seed_prompts(spec, agent_registry)` gives each agent the topology runs (`core.hydrate.agents_in`,
document order) the system prompt it runs with today, so GEPA starts from the prompts phase 1
scored:

- an inline `AgentSpec`: its `system_prompt`;
- a registered `BaseAgent`: its `system_prompt`;
- a registered pydantic-ai `Agent`: its static instructions (the strings given as
  `instructions=`, joined by a blank line); dynamic instruction functions cannot be read and
  count as none;
- anything else (an `AgentLike` without pydantic-ai underneath): refused, as
  `core.agents.overrides` cannot override its prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_ai.agent import AbstractAgent

from core.agents.base import BaseAgent
from core.errors import OptimizationError
from core.hydrate import AgentRegistryLike, agents_in, as_agent_registry
from core.ir.models import AgentSpec, TopologySpec
from core.optimization.genes import Genome

__all__ = ["genome_for", "seed_prompts"]


def _inline_specs(node: Any) -> Iterator[AgentSpec]:
    if isinstance(node, AgentSpec):
        yield node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _inline_specs(getattr(node, name))
    elif isinstance(node, list | tuple):
        for item in node:  # pyright: ignore[reportUnknownVariableType]
            yield from _inline_specs(item)


def _static_instructions(agent: Any) -> str:
    parts: list[str] = []
    items: list[Any] = list(getattr(agent, "_instructions", None) or [])
    for item in items:
        text = item if isinstance(item, str) else getattr(item, "instruction", None)
        if isinstance(text, str):
            parts.append(text)
    return "\n\n".join(parts)


def seed_prompts(spec: TopologySpec, agent_registry: AgentRegistryLike) -> dict[str, str]:
    """Agent name -> the system prompt it runs with now, for every agent `spec` runs.

    Raises:
        OptimizationError: an agent `spec` names is neither inline nor registered, or is
            registered as something without a prompt (the message names it and its type).
    """
    registry = as_agent_registry(agent_registry)
    inline = {s.name: s for s in _inline_specs(spec)}
    prompts: dict[str, str] = {}
    for name in agents_in(spec, registry):
        if name in inline:
            prompts[name] = inline[name].system_prompt
            continue
        if name not in registry:
            raise OptimizationError(f"agent {name!r} of the topology is not registered")
        agent = registry.create(name)
        if isinstance(agent, BaseAgent):
            prompts[name] = str(agent.system_prompt)  # pyright: ignore[reportUnknownMemberType]
        elif isinstance(agent, AbstractAgent):
            prompts[name] = _static_instructions(agent)
        else:
            raise OptimizationError(
                f"agent {name!r} is a {type(agent).__name__}, which has no system prompt to "
                "evolve (only pydantic-ai agents, BaseAgents and inline AgentSpecs have one)"
            )
    return prompts


def genome_for(spec: TopologySpec, agent_registry: AgentRegistryLike) -> Genome:
    """One `PromptGene` per agent of `spec` (`"<agent>.system_prompt"`), seeded by
    `seed_prompts`, in the order `spec` runs them.

    Raises:
        OptimizationError: as `seed_prompts`; `spec` runs no agent (nothing to evolve).
    """
    prompts = seed_prompts(spec, agent_registry)
    if not prompts:
        raise OptimizationError("the topology runs no agent: it has no prompt to evolve")
    return Genome.for_prompts(prompts)
