"""Genes of prompt evolution: `PromptGene`, `ScalarGene`, `CategoricalGene`, and `Genome`.

A gene is one named text component GEPA may rewrite. Like `core.search.TopologyGene`, each gene
has an `initial` value, `encode()` (the value as the text GEPA's candidates carry: GEPA's wire
format is `dict[str, str]`) and `decode(text)` (the value a text holds, falling back to `initial`
when the text is missing or unusable: we would rather lose one iteration than crash a search).

Gene names address what they set. A `PromptGene` is named `"<agent>.system_prompt"` (see
`core.agents.overrides`): decoded, it is the system prompt that agent runs with. Scalar and
categorical genes are encoded and decoded the same way; the prompt evaluator does not apply them
to agents (see `Genome.prompt_overrides`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.agents.overrides import parse_prompt_target
from core.errors import OptimizationError
from core.optimization.config import NEVER_NEST_REASON
from core.search.gene import TopologyGene

__all__ = ["CategoricalGene", "Gene", "Genome", "PromptGene", "ScalarGene"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class PromptGene(BaseModel):
    """A prompt GEPA evolves: the system prompt of one agent of the topology."""

    model_config = _CONFIG

    kind: Literal["prompt"] = "prompt"
    """Discriminator."""
    name: str = Field(min_length=1)
    """`"<agent>.system_prompt"`, e.g. `"solver.system_prompt"`."""
    initial: str
    """The seed prompt: GEPA's seed candidate, and what `decode` falls back to."""

    @field_validator("name")
    @classmethod
    def _target(cls, value: str) -> str:
        parse_prompt_target(value)  # ValueError names the form expected
        return value

    @property
    def agent(self) -> str:
        """The agent whose prompt this is (the name before `.system_prompt`)."""
        return parse_prompt_target(self.name)[0]

    def encode(self) -> str:
        """The seed prompt, as GEPA's candidates carry it (the text itself)."""
        return self.initial

    def decode(self, text: str | None) -> str:
        """The prompt `text` holds; `initial` when it is None or only whitespace."""
        if text is None or not text.strip():
            return self.initial
        return text


class ScalarGene(BaseModel):
    """A number in `[low, high]`, carried as its decimal text."""

    model_config = _CONFIG

    kind: Literal["scalar"] = "scalar"
    """Discriminator."""
    name: str = Field(min_length=1)
    """What it sets, e.g. `"solver.temperature"`."""
    low: float = Field(allow_inf_nan=False)
    """Smallest value allowed."""
    high: float = Field(allow_inf_nan=False)
    """Largest value allowed."""
    initial: float = Field(allow_inf_nan=False)
    """The seed value, within `[low, high]`."""

    @model_validator(mode="after")
    def _range(self) -> ScalarGene:
        if not self.low <= self.initial <= self.high:
            raise ValueError(
                f"scalar gene {self.name!r}: initial {self.initial} is outside "
                f"[{self.low}, {self.high}]"
            )
        return self

    def encode(self) -> str:
        """`repr(initial)`, e.g. `"0.7"`."""
        return repr(self.initial)

    def decode(self, text: str | None) -> float:
        """The number `text` holds, clamped to `[low, high]`; `initial` when `text` is None,
        not a number, or not finite."""
        if text is None:
            return self.initial
        try:
            value = float(text.strip())
        except ValueError:
            return self.initial
        if not math.isfinite(value):
            return self.initial
        return min(self.high, max(self.low, value))


class CategoricalGene(BaseModel):
    """One of a fixed set of choices, carried as the choice's text."""

    model_config = _CONFIG

    kind: Literal["categorical"] = "categorical"
    """Discriminator."""
    name: str = Field(min_length=1)
    """What it sets, e.g. `"solver.style"`."""
    choices: tuple[str, ...] = Field(min_length=1)
    """The values allowed, distinct."""
    initial: str
    """The seed choice (one of `choices`)."""

    @model_validator(mode="after")
    def _choice(self) -> CategoricalGene:
        if len(set(self.choices)) != len(self.choices):
            raise ValueError(f"categorical gene {self.name!r}: choices repeat: {self.choices}")
        if self.initial not in self.choices:
            raise ValueError(
                f"categorical gene {self.name!r}: initial {self.initial!r} is not one of "
                f"{list(self.choices)}"
            )
        return self

    def encode(self) -> str:
        """The seed choice."""
        return self.initial

    def decode(self, text: str | None) -> str:
        """`text` stripped when it is one of `choices`, else `initial`."""
        if text is not None and text.strip() in self.choices:
            return text.strip()
        return self.initial


Gene: TypeAlias = Annotated[PromptGene | ScalarGene | CategoricalGene, Field(discriminator="kind")]
"""Any gene of a `Genome` (discriminated by `kind`)."""


def _items(value: object) -> tuple[Any, ...]:
    """`value`'s items when it is a list or tuple, else none."""
    return tuple(cast("Sequence[Any]", value)) if isinstance(value, list | tuple) else ()


class Genome(BaseModel):
    """The genes GEPA evolves together, by unique name.

    `encode()` gives GEPA's seed candidate (gene name -> text); `decode(candidate)` the values a
    candidate holds (gene name -> prompt text, float or choice), each gene falling back to its
    `initial` for a missing or unusable text.

    Raises:
        pydantic.ValidationError: no genes, two genes with the same name, or a
            `core.search.TopologyGene` among them (topology and prompts are never evolved
            together: `NEVER_NEST_REASON`).
    """

    model_config = _CONFIG

    genes: tuple[Gene, ...] = Field(min_length=1)
    """The genes, in order (GEPA's round-robin component order)."""

    @field_validator("genes", mode="before")
    @classmethod
    def _no_topology(cls, genes: Any) -> Any:
        for g in _items(genes):
            if isinstance(g, TopologyGene):
                raise ValueError(
                    f"topology gene {g.name!r} cannot be evolved with prompts in one genome: "
                    f"{NEVER_NEST_REASON}"
                )
        return genes

    @field_validator("genes")
    @classmethod
    def _unique(cls, genes: tuple[Gene, ...]) -> tuple[Gene, ...]:
        names = [g.name for g in genes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"gene names must be unique; repeated: {dupes}")
        return genes

    @property
    def names(self) -> list[str]:
        """The gene names, in order."""
        return [g.name for g in self.genes]

    def gene(self, name: str) -> Gene:
        """The gene called `name`.

        Raises:
            OptimizationError: no such gene (the message lists the genome's names).
        """
        for g in self.genes:
            if g.name == name:
                return g
        raise OptimizationError(f"no gene {name!r} in the genome (genes: {', '.join(self.names)})")

    def encode(self) -> dict[str, str]:
        """GEPA's seed candidate: gene name -> `gene.encode()`, in gene order."""
        return {g.name: g.encode() for g in self.genes}

    def decode(self, candidate: Mapping[str, str]) -> dict[str, Any]:
        """Gene name -> decoded value for every gene (a missing name gives its `initial`).

        Raises:
            OptimizationError: `candidate` has a name that is no gene of this genome (the
                message names them and lists the genome's names).
        """
        unknown = sorted(set(candidate) - set(self.names))
        if unknown:
            raise OptimizationError(
                f"candidate names unknown genes {unknown} (genes: {', '.join(self.names)})"
            )
        return {g.name: g.decode(candidate.get(g.name)) for g in self.genes}

    def prompt_overrides(self, candidate: Mapping[str, str]) -> dict[str, str]:
        """The decoded prompt genes only, as `core.hydrate` prompt overrides
        (`"<agent>.system_prompt"` -> text).

        Raises:
            OptimizationError: as `decode`.
        """
        decoded = self.decode(candidate)
        return {g.name: decoded[g.name] for g in self.genes if isinstance(g, PromptGene)}

    @property
    def prompt_genes(self) -> list[PromptGene]:
        """The `PromptGene`s, in order."""
        return [g for g in self.genes if isinstance(g, PromptGene)]

    @classmethod
    def for_prompts(cls, prompts: Mapping[str, str] | Sequence[tuple[str, str]]) -> Genome:
        """A genome of one `PromptGene` per `(agent, initial prompt)`, named
        `"<agent>.system_prompt"`, in the order given."""
        items = prompts.items() if isinstance(prompts, Mapping) else prompts
        return cls(genes=tuple(PromptGene(name=f"{a}.system_prompt", initial=p) for a, p in items))
