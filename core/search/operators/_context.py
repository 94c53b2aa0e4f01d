"""What a mutated or sampled candidate may be built from (`MutationContext`), the operator
type, and the helpers every operator shares: node positions, the validity check
(`is_valid_candidate`), new atomic steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import SpecError
from core.evaluation.checks import check_allowed_kinds, normalize_allowed_kinds
from core.hydrate import BUILTIN_MERGES
from core.ir.dataflow import EffectTable, analyse
from core.ir.limits import SpecLimits, parse_topology
from core.ir.metrics import spec_metrics
from core.ir.models import (
    ATOMIC_KINDS,
    COMPOSITE_KINDS,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    TopologySpec,
    child_slots,
)

__all__ = [
    "ROLES",
    "MutationContext",
    "Operator",
    "Pos",
    "atomic_options",
    "finish",
    "is_valid_candidate",
    "new_atomic",
    "positions",
    "rebuild",
    "wrap_targets",
]

ROLES: tuple[str, ...] = ("step", "merge", "condition", "classifier", "evaluator", "state_updater")
"""Callable roles (the same as `core.problems.CALLABLE_ROLES`):

- `step`: `state -> state`, usable as a `function_step`;
- `merge`: `list[output] -> value`, a parallel's merge;
- `condition`: `state -> bool`, a route's `condition_name`;
- `classifier`: `state -> route name`, a router's classifier (not used by the operators: a new
  router's route names could not match what an existing classifier answers);
- `evaluator`: `state -> EvalResult`, a refinement loop's evaluator (a registered agent name
  may be listed here too: the hydrator looks evaluators up in the agent registry first);
- `state_updater`: `(input, output, EvalResult) -> next input`, a loop's state updater.
"""


class MutationContext(BaseModel):
    """What mutated and sampled candidates may be built from, and the limits they must meet.

    Build it from a problem's registries and its gene, or with `from_space` from a search
    space. Names are de-duplicated and sorted on construction (determinism).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    agent_names: Sequence[str] = ()
    """Registered agents usable as agent steps (stored sorted, as a tuple)."""
    callables: Mapping[str, Sequence[str]] = Field(default_factory=dict[str, Sequence[str]])
    """Role -> registered callable names usable in that role; roles are `ROLES`. A name may be
    listed under several roles."""
    allowed_step_kinds: Sequence[str] | None = ("agent_step", "function_step")
    """Node kinds a candidate may use, with the gene's rule: atomic kinds must be listed;
    composite kinds are restricted only when at least one composite kind is listed. None: all."""
    max_depth: int = Field(default=4, ge=1)
    """Maximum nesting depth of a candidate (a flat pipeline is 1)."""
    limits: SpecLimits = Field(default_factory=SpecLimits)
    """The IR's parse limits (node count, and a depth ceiling above `max_depth`)."""
    builtin_merges: Sequence[str] = ("fastest", "first_wins")
    """Built-in merges the operators may use besides the registered `merge` callables. Default:
    the two that return one branch's output, so a wrapped step keeps its output type
    (`collect_all` returns a list; add it here if the next step takes one)."""
    loop_max_iterations: int = Field(default=3, ge=1)
    """`max_iterations` of a loop made by `wrap_in_loop`."""
    agent_costs: Mapping[str, float] = Field(default_factory=dict[str, float])
    """Measured USD per example of each agent alone (e.g. from the archive's single-agent
    candidates): the structure operators escalate only to dearer agents, and the opening orders
    agents cheapest first. Empty: name order, and any other agent counts as dearer."""
    agent_scores: Mapping[str, Sequence[float]] = Field(default_factory=dict[str, Sequence[float]])
    """Per-example accuracy of each agent alone, on the same examples in the same order (e.g.
    the archive's single-agent candidates scored on the full validation split): the opening
    ranks the agent pairs of its input-feature routers by how much one agent is right where
    the other is wrong (`complementarity`). Empty: cost-neighbours first."""
    vote_k: int = Field(default=3, ge=2)
    """Branches of a vote made by `k_vote` and the opening (odd, so two-way ties need three
    different answers)."""
    effects: EffectTable = Field(default_factory=EffectTable)
    """What each registered name reads and produces: the structure operators place a condition
    only where its input exists, and reject what `core.ir.dataflow.analyse` rejects."""
    max_judges: int = Field(default=2, ge=0)
    """Judge conditions (conditions that run an agent, `NameEffect.calls_agent`) the opening
    and the bridges try per escalation: the cheapest judges, each cheaper than the agent
    escalated to (every judge is one more call per example)."""

    @field_validator("agent_names", "builtin_merges")
    @classmethod
    def _sorted(cls, value: Sequence[str]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @field_validator("callables")
    @classmethod
    def _roles(cls, value: Mapping[str, Sequence[str]]) -> Mapping[str, tuple[str, ...]]:
        unknown = sorted(set(value) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown callable role(s) {unknown}; roles are {list(ROLES)}")
        return {r: tuple(sorted(set(value.get(r, ())))) for r in ROLES}

    @field_validator("builtin_merges")
    @classmethod
    def _builtin(cls, value: Sequence[str]) -> Sequence[str]:
        bad = [m for m in value if m not in BUILTIN_MERGES]
        if bad:
            raise ValueError(f"not built-in merges: {bad}; built-ins are {list(BUILTIN_MERGES)}")
        return value

    @field_validator("allowed_step_kinds")
    @classmethod
    def _kinds(cls, value: Sequence[str] | None) -> tuple[str, ...] | None:
        return normalize_allowed_kinds(value)

    @classmethod
    def from_space(cls, space: Any, **overrides: Any) -> MutationContext:
        """A context from a `core.search.strategies.SearchSpace` (gene and registered names).

        Uses `space.agents` (names), `space.names_by_role()`, `space.gene.max_depth` and
        `space.gene.allowed_step_kinds`; `overrides` set any other field.
        """
        data: dict[str, Any] = {
            "agent_names": tuple(a.name for a in space.agents),
            "callables": dict(space.names_by_role()),
            "allowed_step_kinds": tuple(space.gene.allowed_step_kinds),
            "max_depth": int(space.gene.max_depth),
            "effects": space.effects,
        }
        data.update(overrides)
        return cls.model_validate(data)

    def names(self, role: str) -> tuple[str, ...]:
        """Callable names registered for `role` (sorted; empty when none).

        Raises:
            ValueError: an unknown role.
        """
        if role not in ROLES:
            raise ValueError(f"unknown callable role {role!r}; roles are {list(ROLES)}")
        return tuple(self.callables.get(role, ()))

    def merge_names(self) -> tuple[str, ...]:
        """Merges the operators may use: `builtin_merges`, then registered `merge` callables."""
        registered = [m for m in self.names("merge") if m not in self.builtin_merges]
        return (*self.builtin_merges, *registered)

    def kind_allowed(self, kind: str) -> bool:
        """Whether a node of `kind` may appear (the gene's `allowed_step_kinds` rule)."""
        allowed = self.allowed_step_kinds
        if allowed is None or kind in allowed:
            return True
        if kind in ATOMIC_KINDS:
            return False
        return not any(k in COMPOSITE_KINDS for k in allowed)


Operator: TypeAlias = Callable[[TopologySpec, MutationContext, random.Random], TopologySpec | None]
"""A mutation operator: `(spec, ctx, rng) -> new valid spec | None`."""


# --- helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pos:
    path: str
    node: AnyNode
    level: int  # composites above this node
    subtree_depth: int


def positions(spec: AnyNode) -> list[Pos]:
    out: list[Pos] = []
    stack: list[tuple[str, AnyNode, int]] = [("$", spec, 0)]
    while stack:
        path, node, level = stack.pop()
        out.append(Pos(path, node, level, spec_metrics(node).depth))
        for suffix, child in reversed(child_slots(node)):
            stack.append((path + suffix, child, level + 1))
    return out


def rebuild(model: BaseModel, **updates: Any) -> Any:
    data = {name: getattr(model, name) for name in model.model_fields_set}
    data.update(updates)
    return type(model).model_validate(data)


def is_valid_candidate(spec: AnyNode, ctx: MutationContext) -> TopologySpec | None:
    """`spec` as a validated topology when it meets every rule of `ctx`, else None.

    Rules: a composite root, the IR's parse limits (`ctx.limits`), depth at most
    `ctx.max_depth`, every kind allowed by `ctx.allowed_step_kinds`, and no static issue
    (`core.ir.dataflow.analyse` with `ctx.effects`: no condition before its input, no `fastest`
    branch without an answer, an agent where answers need one, no router that matches nothing).
    """
    try:
        parsed = parse_topology(spec, ctx.limits)
    except SpecError:
        return None
    if spec_metrics(parsed).depth > ctx.max_depth:
        return None
    allowed = None if ctx.allowed_step_kinds is None else tuple(ctx.allowed_step_kinds)
    if check_allowed_kinds(parsed, allowed) is not None:
        return None
    if not analyse(parsed, ctx.effects).ok:
        return None
    return parsed


def finish(build: Callable[[], AnyNode], ctx: MutationContext) -> TopologySpec | None:
    try:
        node = build()
    except (SpecError, ValidationError, ValueError):
        return None
    return is_valid_candidate(node, ctx)


def atomic_options(ctx: MutationContext) -> list[tuple[str, str]]:
    options: list[tuple[str, str]] = []
    if ctx.kind_allowed("agent_step"):
        options.extend(("agent_step", name) for name in ctx.agent_names)
    if ctx.kind_allowed("function_step"):
        options.extend(("function_step", name) for name in ctx.names("step"))
    return options


def _atomic_name(node: AnyNode) -> tuple[str, str] | None:
    if isinstance(node, AgentStepSpec) and node.agent_name is not None:
        return ("agent_step", node.agent_name)
    if isinstance(node, FunctionStepSpec):
        return ("function_step", node.callable_name)
    return None


def new_atomic(
    ctx: MutationContext, rng: random.Random, avoid: AnyNode | None = None
) -> AnyNode | None:
    """A new agent or function step (no id), preferring one different from `avoid`."""
    options = atomic_options(ctx)
    if avoid is not None:
        current = _atomic_name(avoid)
        others = [o for o in options if o != current]
        options = others or options
    if not options:
        return None
    kind, name = rng.choice(options)
    if kind == "agent_step":
        return AgentStepSpec(agent_name=name)
    return FunctionStepSpec(callable_name=name)


def wrap_targets(spec: AnyNode, ctx: MutationContext) -> list[Pos]:
    """Nodes that can gain one level of nesting without exceeding `max_depth`."""
    return [p for p in positions(spec) if p.level + 1 + p.subtree_depth <= ctx.max_depth]
