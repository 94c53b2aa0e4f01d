"""Structural metrics of a spec (semantics section 6).

- `n_nodes`: nodes of every kind (the six operation kinds; classifiers and evaluators are fields,
  not nodes).
- `depth`: 0 for an atomic step, 1 + the deepest child for a composite; a router's children
  include its fallback; classifiers and evaluators add no depth.
- `n_agents`: agent steps + agent classifiers + agent evaluators. An inline `AgentSpec`
  classifier or evaluator is always an agent. A *string* classifier or evaluator resolves at
  hydration to the agent registry first, then the callable registry, so statically it is
  ambiguous: by default it counts as an agent (an upper bound on model-calling parts, which is
  what a cost-aware search wants); pass `agent_names` (e.g. the agent registry's names) to count
  it only when it names a registered agent.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import BaseModel, ConfigDict, Field

from core.ir.models import (
    KINDS,
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    RefinementLoopSpec,
    RouterSpec,
    child_slots,
)

__all__ = ["StructuralMetrics", "spec_metrics"]


class StructuralMetrics(BaseModel):
    """Counts that describe a spec's shape."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    n_agents: int = Field(ge=0)
    """Agent steps + agent classifiers + agent evaluators (see the module docstring)."""
    depth: int = Field(ge=0)
    """0 for an atomic step, 1 + the deepest child for a composite."""
    n_nodes: int = Field(ge=1)
    """Nodes of every kind."""
    kind_counts: dict[str, int]
    """Nodes per kind, every kind present (0 when absent), in `KINDS` order."""


def _is_agent(ref: AgentSpec | str | None, agent_names: Collection[str] | None) -> bool:
    if ref is None:
        return False
    if isinstance(ref, AgentSpec):
        return True
    return agent_names is None or ref in agent_names


def spec_metrics(spec: AnyNode, *, agent_names: Collection[str] | None = None) -> StructuralMetrics:
    """Compute `StructuralMetrics` for `spec` (iteratively: any depth).

    Args:
        spec: any node (a whole topology or a sub-tree).
        agent_names: names that are agents; when given, a string classifier or evaluator counts
            as an agent only if it is in this collection. Default None: every string classifier
            and evaluator counts as an agent.
    """
    counts = dict.fromkeys(KINDS, 0)
    n_agents = 0
    # post-order depth: stack of (node, children visited?)
    depth_of: dict[int, int] = {}
    stack: list[tuple[AnyNode, bool]] = [(spec, False)]
    while stack:
        node, expanded = stack.pop()
        children = [child for _, child in child_slots(node)]
        if not expanded:
            counts[node.node_kind] += 1
            if isinstance(node, AgentStepSpec):
                n_agents += 1
            elif isinstance(node, RouterSpec):
                n_agents += _is_agent(node.classifier, agent_names)
            elif isinstance(node, RefinementLoopSpec):
                n_agents += _is_agent(node.evaluator, agent_names)
            stack.append((node, True))
            stack.extend((child, False) for child in children)
        else:
            depth_of[id(node)] = (
                1 + max(depth_of[id(child)] for child in children) if children else 0
            )
    return StructuralMetrics(
        n_agents=n_agents,
        depth=depth_of[id(spec)],
        n_nodes=sum(counts.values()),
        kind_counts=counts,
    )
