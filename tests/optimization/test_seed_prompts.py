"""Phase 2's seed genome: each agent of the winner with the prompt it runs now."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent

from core import AgentSpec, AgentStepSpec, FunctionStepSpec, PipelineSpec, PipelineStepEntry
from core.agents.base import BaseAgent
from core.errors import OptimizationError
from core.optimization import PromptGene
from core.optimization.seeds import genome_for, seed_prompts


def _pipeline(*ops: AgentStepSpec | FunctionStepSpec) -> PipelineSpec:
    return PipelineSpec(steps=[PipelineStepEntry(operation=op) for op in ops])


SPEC = _pipeline(
    AgentStepSpec(agent_name="solver"),
    AgentStepSpec(
        inline_spec=AgentSpec(
            name="critic", system_prompt="Find the flaw.", output_schema={"type": "string"}
        )
    ),
    AgentStepSpec(agent_name="base"),
    AgentStepSpec(agent_name="solver"),
)
REGISTRY = {
    "solver": lambda: Agent("test", instructions="Solve it.", name="solver"),
    "base": lambda: BaseAgent("base", model="test", system_prompt="Check the sum."),
}


def test_every_agent_once_with_the_prompt_it_runs() -> None:
    assert seed_prompts(SPEC, REGISTRY) == {
        "solver": "Solve it.",
        "critic": "Find the flaw.",
        "base": "Check the sum.",
    }
    assert genome_for(SPEC, REGISTRY).genes == (
        PromptGene(name="solver.system_prompt", initial="Solve it."),
        PromptGene(name="critic.system_prompt", initial="Find the flaw."),
        PromptGene(name="base.system_prompt", initial="Check the sum."),
    )


def test_an_agent_without_instructions_seeds_an_empty_prompt() -> None:
    spec = _pipeline(AgentStepSpec(agent_name="plain"))
    assert seed_prompts(spec, {"plain": lambda: Agent("test")}) == {"plain": ""}


def test_what_has_no_prompt_is_refused_by_name() -> None:
    class Quacks:
        async def run(self, prompt: str) -> str:
            return prompt

    spec = _pipeline(AgentStepSpec(agent_name="duck"))
    with pytest.raises(OptimizationError, match="agent 'duck' is a Quacks, which has no system"):
        seed_prompts(spec, {"duck": Quacks})
    only_functions = _pipeline(FunctionStepSpec(callable_name="f"))
    with pytest.raises(OptimizationError, match="runs no agent: it has no prompt to evolve"):
        genome_for(only_functions, {})
