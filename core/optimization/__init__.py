"""Prompt evolution: the genes GEPA evolves over a fixed topology.

`PromptGene`, `ScalarGene`, `CategoricalGene` and `Genome` (see `core.optimization.genes`). Prompt
genes are applied to agents through `core.hydrate.topology_from_spec(prompt_overrides=...)` and
`TopologyEvaluator.evaluate(prompt_overrides=...)`. `OptimizationRunner` runs GEPA over them
with a `PromptAdapter`; `Evaluator` is the reference library's `Evaluator(agent_factory=...,
score_fn=...)` form of the topology to tune.
"""

from core.optimization.adapter import PromptAdapter
from core.optimization.config import NEVER_NEST_REASON, OptimizationConfig
from core.optimization.evaluator import Evaluator
from core.optimization.genes import CategoricalGene, Gene, Genome, PromptGene, ScalarGene
from core.optimization.runner import DEFAULT_REFLECTION_MODEL, OptimizationRunner

__all__ = [
    "DEFAULT_REFLECTION_MODEL",
    "NEVER_NEST_REASON",
    "CategoricalGene",
    "Evaluator",
    "Gene",
    "Genome",
    "OptimizationConfig",
    "OptimizationRunner",
    "PromptAdapter",
    "PromptGene",
    "ScalarGene",
]
