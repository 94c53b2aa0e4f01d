"""Prompt evolution (issue 16): the genes GEPA evolves over a fixed topology.

`PromptGene`, `ScalarGene`, `CategoricalGene` and `Genome` (see `core.optimization.genes`). Prompt
genes are applied to agents through `core.hydrate.topology_from_spec(prompt_overrides=...)` and
`TopologyEvaluator.evaluate(prompt_overrides=...)`.
"""

from core.optimization.adapter import PromptAdapter
from core.optimization.config import NEVER_NEST_REASON, OptimizationConfig
from core.optimization.genes import CategoricalGene, Gene, Genome, PromptGene, ScalarGene
from core.optimization.runner import OptimizationRunner

__all__ = [
    "NEVER_NEST_REASON",
    "CategoricalGene",
    "Gene",
    "Genome",
    "OptimizationConfig",
    "OptimizationRunner",
    "PromptAdapter",
    "PromptGene",
    "ScalarGene",
]
