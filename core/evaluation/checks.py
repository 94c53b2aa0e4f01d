"""The checks a candidate spec must pass before anything runs (F4), and their result.

`TopologyEvaluator.check(spec)` runs them, in this order, and `TopologyEvaluator.evaluate` runs
the same checks before it evaluates anything; the search engine and the meta agent's debug loop
use `check` too, so there is one definition of a valid candidate:

1. parse with the structural limits (`invalid_spec`, `max_depth_exceeded`,
   `max_nodes_exceeded`);
2. `max_depth` (`check_max_depth`) and `allowed_step_kinds` (`check_allowed_kinds`);
3. inline agents while they are disabled (`inline_agents_disabled`, `inline_agent_path`);
4. hydration, which resolves every registered name first (`unknown_names`, with every unknown
   name and its JSON path) and then builds the topology (`hydration_error`).

The helpers here are pure functions the search's mutation operators and `TopologyGene` reuse.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from core.ir.models import (
    ATOMIC_KINDS,
    COMPOSITE_KINDS,
    KINDS,
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    RefinementLoopSpec,
    RouterSpec,
    TopologySpec,
    walk,
)

__all__ = [
    "CheckResult",
    "check_allowed_kinds",
    "check_max_depth",
    "inline_agent_path",
    "normalize_allowed_kinds",
]


class CheckResult(BaseModel):
    """A candidate checked before anything runs: the parsed spec, or why it is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    spec: TopologySpec | None = None
    """The parsed spec (None when it did not parse)."""
    spec_hash: str = ""
    """Its canonical hash ("" when it did not parse)."""
    reason: str | None = None
    """Why it is refused, code first (`invalid_spec`, `max_depth_exceeded`,
    `max_nodes_exceeded`, `step_kind_not_allowed`, `inline_agents_disabled`, `unknown_names`,
    `hydration_error`); None: valid."""
    unknown_names: tuple[tuple[str, str, str], ...] = ()
    """For `unknown_names`: `(json_path, kind, name)` per unknown name."""
    known_names: dict[str, tuple[str, ...]] = Field(default_factory=dict[str, tuple[str, ...]])
    """For `unknown_names`: the registered names per kind (for a debug retry)."""
    n_agents: int | None = None
    """The spec's agent count (section 6), when it parsed."""
    depth: int | None = None
    """The spec's nesting depth (section 6), when it parsed."""
    behaviour_hash: str = ""
    """The canonical hash of its behavioural normal form (`core.ir.dataflow.behaviour_hash`):
    equal for candidates that must behave the same; set by the search's checker ("" when not
    computed)."""

    @property
    def ok(self) -> bool:
        """True when the candidate is valid."""
        return self.reason is None and self.spec is not None


def normalize_allowed_kinds(kinds: Iterable[str] | None) -> tuple[str, ...] | None:
    """Validate an `allowed_step_kinds` option: known kind names, no duplicates, sorted by IR order.

    Raises:
        ValueError: a name is not an IR kind.
    """
    if kinds is None:
        return None
    names = tuple(kinds) if not isinstance(kinds, str) else (kinds,)
    unknown = sorted(set(names) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown step kind(s) {unknown}; the IR kinds are {list(KINDS)}")
    return tuple(k for k in KINDS if k in names)


def check_max_depth(depth: int, max_depth: int | None) -> str | None:
    """`"max_depth_exceeded: depth 5 > 4"` when `depth` exceeds `max_depth`, else None."""
    if max_depth is not None and depth > max_depth:
        return f"max_depth_exceeded: depth {depth} > {max_depth}"
    return None


def check_allowed_kinds(spec: AnyNode, allowed: tuple[str, ...] | None) -> str | None:
    """A `step_kind_not_allowed` reason naming every offending node and its JSON path, or None.

    Rule: atomic kinds (`agent_step`, `function_step`) must be in `allowed`. Composite kinds
    (`pipeline`, `parallel`, `router`, `refinement_loop`) are checked only when `allowed` names
    at least one composite kind; otherwise they are all allowed, which is what the default
    `TopologyGene.allowed_step_kinds = ("agent_step", "function_step")` means (a topology is
    always a composite). None allows everything.

    Example: `"step_kind_not_allowed: function_step at $.steps[1].operation (allowed:
    agent_step)"`.
    """
    if allowed is None:
        return None
    restrict_composites = any(k in COMPOSITE_KINDS for k in allowed)
    checked: set[str] = set(ATOMIC_KINDS)
    if restrict_composites:
        checked |= set(COMPOSITE_KINDS)
    bad = [
        f"{node.kind} at {path}"
        for path, node in walk(spec)
        if node.kind in checked and node.kind not in allowed
    ]
    if not bad:
        return None
    return f"step_kind_not_allowed: {'; '.join(bad)} (allowed: {', '.join(allowed) or 'none'})"


def inline_agent_path(spec: AnyNode) -> str | None:
    """The JSON path of the first inline `AgentSpec` (step, classifier or evaluator), or None."""
    for path, node in walk(spec):
        if isinstance(node, AgentStepSpec) and node.inline_spec is not None:
            return f"{path}.inline_spec"
        if isinstance(node, RouterSpec) and isinstance(node.classifier, AgentSpec):
            return f"{path}.classifier"
        if isinstance(node, RefinementLoopSpec) and isinstance(node.evaluator, AgentSpec):
            return f"{path}.evaluator"
    return None
