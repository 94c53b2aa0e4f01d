"""Never nest (the reference guide's rule: nesting multiplies costs, and a topology change
invalidates learned prompts): prompt evolution inside each topology candidate is refused with the
guide's reason, whether asked for in the config or by putting a topology gene in the genome."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.ir import parse_topology
from core.optimization import NEVER_NEST_REASON, Genome, OptimizationConfig, PromptGene
from core.search.gene import TopologyGene

REASON = (
    "prompt evolution runs once, on the winning topology (phase 2), never inside each topology "
    "candidate: nesting multiplies the model calls (topology candidates x prompt candidates x "
    "evaluations x validation examples), and a topology mutation invalidates the prompts "
    "evolved for the structure before it, so the inner run's calls are wasted"
)


def test_a_nested_config_is_refused_with_the_reason() -> None:
    assert NEVER_NEST_REASON == REASON
    with pytest.raises(ValidationError) as exc:
        OptimizationConfig(per_topology_candidate=True)
    errors = exc.value.errors()
    assert len(errors) == 1
    assert errors[0]["loc"] == ("per_topology_candidate",)
    assert errors[0]["msg"] == f"Value error, refused: {REASON}"


def test_the_two_phase_config_is_accepted_and_not_passed_to_gepa() -> None:
    config = OptimizationConfig(per_topology_candidate=False, max_metric_calls=20)
    assert config.per_topology_candidate is False
    assert "per_topology_candidate" not in config.gepa_kwargs()
    assert config.gepa_kwargs()["max_metric_calls"] == 20


def test_a_genome_with_a_topology_gene_is_refused_with_the_reason() -> None:
    topo = TopologyGene(
        name="main",
        initial=parse_topology(
            {
                "kind": "pipeline",
                "steps": [{"operation": {"kind": "agent_step", "agent_name": "s"}}],
            }
        ),
    )
    with pytest.raises(ValidationError) as exc:
        Genome(genes=(PromptGene(name="s.system_prompt", initial="x"), topo))  # type: ignore[arg-type]
    assert exc.value.errors()[0]["msg"] == (
        f"Value error, topology gene 'main' cannot be evolved with prompts in one genome: {REASON}"
    )
