"""Genes of prompt evolution: encode / decode with exact values, and their refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.errors import OptimizationError, SearchError
from core.optimization import CategoricalGene, Genome, PromptGene, ScalarGene


def test_prompt_gene_encodes_its_text_and_decodes_with_fallback() -> None:
    gene = PromptGene(name="solver.system_prompt", initial="Solve it.")
    assert gene.agent == "solver"
    assert gene.encode() == "Solve it."
    assert gene.decode("End with 'Answer: <n>'.") == "End with 'Answer: <n>'."
    assert gene.decode(None) == "Solve it."
    assert gene.decode("  \n") == "Solve it."
    # agent names may contain dots: the field is after the last one
    assert PromptGene(name="team.critic.system_prompt", initial="").agent == "team.critic"


@pytest.mark.parametrize(
    "name", ["solver", "solver.temperature", ".system_prompt", "system_prompt"]
)
def test_prompt_gene_names_must_address_a_system_prompt(name: str) -> None:
    with pytest.raises(ValidationError) as exc:
        PromptGene(name=name, initial="x")
    assert f"prompt target {name!r} is not of the form '<agent>.system_prompt'" in str(exc.value)


def test_scalar_gene_round_trip_clamps_and_falls_back() -> None:
    gene = ScalarGene(name="solver.temperature", low=0.0, high=1.0, initial=0.7)
    assert gene.encode() == "0.7"
    assert gene.decode(gene.encode()) == 0.7
    assert gene.decode(" 0.25 ") == 0.25
    assert gene.decode("3") == 1.0
    assert gene.decode("-2") == 0.0
    assert gene.decode("warm") == 0.7
    assert gene.decode("nan") == 0.7
    assert gene.decode(None) == 0.7
    with pytest.raises(ValidationError) as exc:
        ScalarGene(name="t", low=0.0, high=1.0, initial=2.0)
    assert "scalar gene 't': initial 2.0 is outside [0.0, 1.0]" in str(exc.value)


def test_categorical_gene_round_trip_and_refusals() -> None:
    gene = CategoricalGene(name="solver.style", choices=("terse", "verbose"), initial="terse")
    assert gene.encode() == "terse"
    assert gene.decode("verbose ") == "verbose"
    assert gene.decode("chatty") == "terse"
    assert gene.decode(None) == "terse"
    with pytest.raises(ValidationError) as exc:
        CategoricalGene(name="s", choices=("a", "b"), initial="c")
    assert "categorical gene 's': initial 'c' is not one of ['a', 'b']" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        CategoricalGene(name="s", choices=("a", "a"), initial="a")
    assert "categorical gene 's': choices repeat: ('a', 'a')" in str(exc.value)


def _genome() -> Genome:
    return Genome(
        genes=(
            PromptGene(name="solver.system_prompt", initial="Solve it."),
            ScalarGene(name="solver.temperature", low=0.0, high=1.0, initial=0.5),
            CategoricalGene(name="solver.style", choices=("terse", "verbose"), initial="terse"),
            PromptGene(name="checker.system_prompt", initial="Check it."),
        )
    )


def test_genome_encode_decode_round_trip() -> None:
    genome = _genome()
    assert genome.names == [
        "solver.system_prompt",
        "solver.temperature",
        "solver.style",
        "checker.system_prompt",
    ]
    seed = genome.encode()
    assert seed == {
        "solver.system_prompt": "Solve it.",
        "solver.temperature": "0.5",
        "solver.style": "terse",
        "checker.system_prompt": "Check it.",
    }
    assert genome.decode(seed) == {
        "solver.system_prompt": "Solve it.",
        "solver.temperature": 0.5,
        "solver.style": "terse",
        "checker.system_prompt": "Check it.",
    }
    # a partial candidate: missing genes give their initial values
    assert genome.decode({"solver.system_prompt": "New.", "solver.temperature": "0.9"}) == {
        "solver.system_prompt": "New.",
        "solver.temperature": 0.9,
        "solver.style": "terse",
        "checker.system_prompt": "Check it.",
    }
    assert genome.prompt_overrides({"checker.system_prompt": "Be strict."}) == {
        "solver.system_prompt": "Solve it.",
        "checker.system_prompt": "Be strict.",
    }
    assert [g.name for g in genome.prompt_genes] == [
        "solver.system_prompt",
        "checker.system_prompt",
    ]
    # the genome itself survives JSON (the discriminated union)
    assert Genome.model_validate_json(genome.model_dump_json()) == genome


def test_genome_refuses_unknown_gene_names() -> None:
    genome = _genome()
    with pytest.raises(OptimizationError) as exc:
        genome.decode({"solver.system_prompt": "x", "planner.system_prompt": "y", "zz": "1"})
    assert str(exc.value) == (
        "candidate names unknown genes ['planner.system_prompt', 'zz'] (genes: "
        "solver.system_prompt, solver.temperature, solver.style, checker.system_prompt)"
    )
    assert isinstance(exc.value, SearchError)
    with pytest.raises(OptimizationError) as exc:
        genome.gene("planner.system_prompt")
    assert str(exc.value) == (
        "no gene 'planner.system_prompt' in the genome (genes: solver.system_prompt, "
        "solver.temperature, solver.style, checker.system_prompt)"
    )
    assert genome.gene("solver.style").encode() == "terse"


def test_genome_refuses_empty_and_repeated_names() -> None:
    with pytest.raises(ValidationError):
        Genome(genes=())
    with pytest.raises(ValidationError) as exc:
        Genome.for_prompts([("solver", "a"), ("solver", "b")])
    assert "gene names must be unique; repeated: ['solver.system_prompt']" in str(exc.value)


def test_genome_for_prompts() -> None:
    genome = Genome.for_prompts({"solver": "Solve.", "checker": "Check."})
    assert genome.encode() == {"solver.system_prompt": "Solve.", "checker.system_prompt": "Check."}
    assert all(isinstance(g, PromptGene) for g in genome.genes)
