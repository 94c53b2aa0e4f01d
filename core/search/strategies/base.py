"""The strategy interface: what a search strategy proposes and what it is told.

The engine owns the loop (budgets, evaluation, promotion, archive, events); a strategy only
proposes candidates (`ask`) and hears how they did (`tell`). See `Strategy` for the contract,
which `tests/contracts/strategy_contract.py` checks for every implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.evaluation.checks import CheckResult
from core.evaluation.metrics import MetricWeights
from core.ir.dataflow import EffectTable
from core.ir.models import TopologySpec
from core.problems.config import RandomSeed
from core.search.gene import TopologyGene
from core.search.result import CandidateRecord

if TYPE_CHECKING:
    from core.search.archive import Archive
    from core.search.learned import TrainAccess

__all__ = [
    "AskContext",
    "CheckResult",
    "NameInfo",
    "Proposal",
    "SearchSpace",
    "Strategy",
    "StrategyConfig",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

ArchiveStrategy = Literal["top_k", "cumulative", "parallel"]
"""What the designer is shown of the archive (semantics section 8)."""


class StrategyConfig(BaseModel):
    """Options every strategy has (one frozen config model per strategy extends this).

    The engine reads these: how many generations, the minibatch size, the seed of the minibatch
    draws, the weights of the aggregate score, and the archive's view.
    """

    model_config = _CONFIG

    n_generations: int | None = Field(default=10, ge=1)
    """Generations to run (each asks the strategy once); None: until a budget stops the run
    (then the budget must set a limit)."""
    minibatch_size: int = Field(default=5, ge=1)
    """Validation examples per candidate evaluation during the search (all of them when the
    split is smaller). The same examples for every candidate of a generation."""
    minibatch_margin: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    """When set, one fixed minibatch for the whole run, sized from the seed's measured
    variance: the smallest n >= `minibatch_size` with 1.96 * sqrt(p * (1 - p) / n) <= margin
    (the 95% normal-approximation half-width of an accuracy estimate; p = the seed's
    validation accuracy, floored at 0.05 and capped at 0.95), at most the whole split (see
    `core.search._space.minibatch_size_for`). Every candidate is then scored on the same
    examples, so selection compares like with like. None: a new draw of `minibatch_size`
    examples each generation."""
    promotion_k_se: float = Field(default=0.0, ge=0, le=10, allow_inf_nan=False)
    """With a fixed minibatch: how many paired standard errors (`core.search.noise.
    paired_standard_error` of the per-example accuracy differences on the minibatch) another
    candidate's accuracy must exceed a candidate's by to keep it from full validation, when it is
    also at least as cheap and as fast. 0: any accuracy at least as high blocks (plain
    non-domination on the minibatch's means); 2: only a lead beyond two standard errors, about
    the 95% paired test, so a candidate within noise of a dominating one is still promoted and
    scored in full."""
    seed: RandomSeed = 42
    """Seed of the strategy's random generator and of the minibatch draws: 0 to 2**63 - 1 (a
    run records it as a signed 64-bit integer; `core.problems.config.RandomSeed`)."""
    weights: MetricWeights = Field(default_factory=MetricWeights)
    """Weights of the aggregate score (mean scalarized bundle) used to compare candidates."""
    archive_strategy: ArchiveStrategy = "top_k"
    """What `Archive.view()` shows the designer: `top_k`, `cumulative` or `parallel`."""
    archive_size: int = Field(default=5, ge=1)
    """How many entries the view shows (`top_k`, `parallel`)."""


class NameInfo(BaseModel):
    """One registered name a candidate may use, with what it is for."""

    model_config = _CONFIG

    name: str
    """The registered name."""
    description: str = ""
    """One line saying what it does."""
    roles: tuple[str, ...] = ()
    """Callable roles (`"step"`, `"merge"`, `"condition"`, `"classifier"`, `"evaluator"`,
    `"state_updater"`); empty for agents."""


class SearchSpace(BaseModel):
    """Everything a candidate may be built from: the gene (seed, constraints, depth limit,
    allowed kinds) and the registered names with descriptions and roles."""

    model_config = _CONFIG

    gene: TopologyGene
    """The gene being searched."""
    agents: tuple[NameInfo, ...] = ()
    """Registered agents, sorted by name."""
    callables: tuple[NameInfo, ...] = ()
    """Registered callables, sorted by name, each with its roles."""
    problem_description: str = ""
    """What the problem is, in words (shown to the designer)."""
    effects: EffectTable = Field(default_factory=EffectTable)
    """What each registered name reads and produces (`core.ir.dataflow`): static rejections,
    no-op normalisation and the structure operators use it."""

    def names_by_role(self) -> dict[str, list[str]]:
        """Role -> callable names usable in it, sorted; every role present."""
        roles = ("step", "merge", "condition", "classifier", "evaluator", "state_updater")
        out: dict[str, list[str]] = {r: [] for r in roles}
        for info in self.callables:
            for role in info.roles:
                out.setdefault(role, []).append(info.name)
        return {r: sorted(v) for r, v in out.items()}

    def allowed_names_text(self) -> str:
        """The allowed names as text for a prompt: agents, then callables by role."""
        lines = [
            "agents (agent_name, classifier, evaluator): " + _join(a.name for a in self.agents)
        ]
        for role, names in self.names_by_role().items():
            lines.append(f"callables with role {role}: {_join(names)}")
        return "\n".join(lines)


def _join(names: Any) -> str:
    items = [str(n) for n in names]
    return ", ".join(items) if items else "(none)"


class Proposal(BaseModel):
    """One candidate a strategy proposes.

    Give a parsed `spec`, or the raw `text` (e.g. a designer's output that the engine parses
    and checks), or a `reason` when the strategy gave up on it (it is then recorded as rejected,
    with its design cost, and not evaluated).
    """

    model_config = _CONFIG

    spec: TopologySpec | None = None
    """The proposed spec."""
    text: str | None = None
    """The proposal as raw text, when there is no parsed spec."""
    parent_idx: int | None = None
    """The candidate it derives from: it must beat that one on the minibatch to be promoted.
    None: compared with the seed."""
    operator: str = ""
    """How it was made, e.g. `"meta_agent"`, `"mutate:add_parallel_branch"`, `"random_spec"`."""
    thought: str = ""
    """The designer's reasoning, if any."""
    design_cost_usd: float = Field(default=0.0, ge=0)
    """USD spent designing it (every designer call, retries and debug rounds included)."""
    design_requests: int = Field(default=0, ge=0)
    """Model requests spent designing it."""
    design_input_tokens: int = Field(default=0, ge=0)
    """Input tokens of those requests."""
    design_output_tokens: int = Field(default=0, ge=0)
    """Output tokens of those requests."""
    reason: str | None = None
    """Set when the strategy could not make a valid proposal (e.g. the designer never produced
    a valid design): the candidate is recorded as rejected with this reason."""
    replayed: bool = False
    """True when it was taken from a recorded run (resume): its design cost was paid then."""

    @model_validator(mode="after")
    def _something(self) -> Proposal:
        if self.reason is None and self.spec is None and self.text is None:
            raise ValueError("a proposal needs a spec, a text, or a reason (rejected)")
        return self


@dataclass(frozen=True, slots=True)
class AskContext:
    """What a strategy sees when asked for proposals (read it; never mutate what it holds).

    Attributes:
        generation: the generation being proposed for (0-based).
        space: what candidates may be built from.
        seed_spec: the seed topology (candidate 0).
        archive: every evaluated candidate so far (scores on the split each entry records).
        archive_candidates: the candidate index of each archive entry, by archive index.
        history: every candidate so far, in candidate order (rejected and duplicates included).
        next_candidate_idx: the index the first proposal will get (then +1 per proposal).
        check: checks a spec or raw text exactly as the engine will (the evaluator's
            `check`: parse with limits, depth, allowed kinds, registered names, hydration),
            before anything runs.
        known_hashes: canonical hashes of every candidate so far, and the hashes of their
            behavioural normal forms (`CheckResult.behaviour_hash`): a proposal with either is a
            duplicate and is not evaluated again.
        recorded: for a resumed run, recorded proposals by candidate index: a strategy that
            calls a model returns the recorded proposal for an index instead of calling it.
        max_proposals: the most proposals the engine can still evaluate under the budget
            (None: no such limit); extra proposals are recorded as not evaluated.
        train: the train split, for strategies that fit learned parts on it
            (`core.search.learned.TrainAccess`); None when the problem has none.
    """

    generation: int
    space: SearchSpace
    seed_spec: TopologySpec
    archive: Archive
    archive_candidates: tuple[int, ...]
    history: tuple[CandidateRecord, ...]
    next_candidate_idx: int
    check: Callable[[TopologySpec | str], CheckResult]
    known_hashes: frozenset[str] = frozenset()
    recorded: Mapping[int, Proposal] = field(default_factory=dict[int, Proposal])
    max_proposals: int | None = None
    train: TrainAccess | None = None


class Strategy(ABC):
    """A search strategy: proposes candidate topologies; the engine does everything else.

    Contract (checked by `tests/contracts/strategy_contract.py` for every implementation):

    - `ask(ctx)` returns the generation's proposals, in order (possibly none, e.g. when nothing
      new and valid can be found). Each proposal's `parent_idx`, if set, is the index of an
      evaluated candidate of `ctx.history`.
    - Proposals are valid: a strategy that builds specs itself (mutations, sampling) returns
      only specs for which `ctx.check(spec).ok` holds, and avoids `ctx.known_hashes`. A
      designer-based strategy may return raw text; whatever it could not make valid it returns
      with `reason` set (it is recorded as rejected, never evaluated).
    - Deterministic: the same config (seed) and the same contexts give the same proposals. Use
      one `random.Random(config.seed)` owned by the strategy, never the global `random`, and
      never depend on set or dict order of hashed values.
    - Cost: every model call made while designing is in the proposal's `design_cost_usd`,
      `design_requests` and `design_input_tokens` / `design_output_tokens`, failed and retried
      calls included.
    - Resume: a strategy that calls a model returns `ctx.recorded[idx]` (with `replayed=True`)
      for a recorded index instead of calling the model; strategies without a model re-derive
      their proposals from their seeded generator.
    - `tell(records)` hears how the generation's candidates ended (the default does nothing);
      `preflight(space)` runs once before anything else and raises to fail fast (e.g. a model
      whose provider cannot take the output schema: F2); the default does nothing.
    - `ask` and `tell` are called from one task, one generation at a time.

    Attributes:
        name: the strategy's name for `get_strategy` and run records, e.g. `"evolutionary"`.
        config: the strategy's options (a `StrategyConfig` subclass).
    """

    name: ClassVar[str] = ""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    def preflight(self, space: SearchSpace) -> None:  # noqa: B027 (optional hook, no-op)
        """Fail fast before any evaluation or paid call (default: nothing to check)."""

    @abstractmethod
    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """The proposals of generation `ctx.generation`, in order."""

    def tell(self, records: Sequence[CandidateRecord]) -> None:  # noqa: B027 (optional hook)
        """How the candidates of the last `ask` ended (default: ignored)."""

    def describe(self) -> dict[str, Any]:
        """The strategy's name and options as JSON, for `RunStarted.config`."""
        return {"strategy": self.name, **self.config.model_dump(mode="json")}
