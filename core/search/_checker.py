"""Checking a proposal before anything runs, with the evaluator's rules and reason codes.

The search engine checks every proposal before it is evaluated (so a rejected or duplicate
proposal is recorded without a call to the evaluator), and the meta agent checks its designs in
its debug loop (so the designer sees the full validation or hydration error with the allowed
names). The rules and the reason codes are the evaluator's (`core.evaluation.evaluator`, step
1): `invalid_spec`, `max_depth_exceeded`, `max_nodes_exceeded`, `step_kind_not_allowed`,
`inline_agents_disabled`, `unknown_names`, `hydration_error`. Should the two ever disagree, the
evaluator's verdict on evaluation wins (the engine records its rejection).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.errors import SpecError, SpecLimitError, UnknownNamesError
from core.evaluation._checks import check_allowed_kinds, check_max_depth
from core.hydrate import AgentRegistry, CallableRegistry, topology_from_spec, validate_names
from core.ir import SpecLimits, TopologySpec, parse_topology
from core.ir.canonical import spec_hash
from core.ir.metrics import spec_metrics
from core.ir.models import AgentSpec, AgentStepSpec, AnyNode, RefinementLoopSpec, RouterSpec, walk
from core.search.strategies.base import CheckResult

__all__ = ["CandidateChecker"]


def _inline_agent_path(spec: AnyNode) -> str | None:
    for path, node in walk(spec):
        if isinstance(node, AgentStepSpec) and node.inline_spec is not None:
            return f"{path}.inline_spec"
        if isinstance(node, RouterSpec) and isinstance(node.classifier, AgentSpec):
            return f"{path}.classifier"
        if isinstance(node, RefinementLoopSpec) and isinstance(node.evaluator, AgentSpec):
            return f"{path}.evaluator"
    return None


class CandidateChecker:
    """Checks a spec or raw text the way the evaluator does before it runs anything.

    Args:
        callable_registry: the registered functions.
        agent_registry: the registered agent factories.
        max_depth: the gene's depth limit.
        allowed_step_kinds: the gene's allowed kinds (None: all).
        limits: the IR's parse limits.
        agent_factory: builds inline agents; None refuses them (`inline_agents_disabled`).
    """

    def __init__(
        self,
        *,
        callable_registry: CallableRegistry,
        agent_registry: AgentRegistry,
        max_depth: int | None,
        allowed_step_kinds: tuple[str, ...] | None,
        limits: SpecLimits | None = None,
        agent_factory: Callable[[AgentSpec], Any] | None = None,
    ) -> None:
        self._callables = callable_registry
        self._agents = agent_registry
        self._max_depth = max_depth
        self._allowed = allowed_step_kinds
        self._limits = limits
        self._agent_factory = agent_factory
        self._memo: dict[str, CheckResult] = {}

    def __call__(self, spec: Any) -> CheckResult:
        """Check `spec` (a `TopologySpec`, JSON text or a mapping); never raises for a bad one.

        Verdicts of parsed specs are remembered by canonical hash (registries are not expected
        to change during a search), so checking a proposal again costs a hash.
        """
        try:
            parsed = parse_topology(spec, self._limits)
        except SpecLimitError as exc:
            return CheckResult(reason=f"{exc.limit}_exceeded: {exc}")
        except SpecError as exc:
            return CheckResult(reason=f"invalid_spec: {exc}")
        digest = spec_hash(parsed)
        known = self._memo.get(digest)
        if known is None:
            known = self._memo[digest] = self._check(parsed, digest)
        return known if known.spec is parsed else known.model_copy(update={"spec": parsed})

    def _check(self, parsed: TopologySpec, digest: str) -> CheckResult:
        depth = spec_metrics(parsed).depth
        reason = check_max_depth(depth, self._max_depth) or check_allowed_kinds(
            parsed, self._allowed
        )
        if reason is None and self._agent_factory is None:
            path = _inline_agent_path(parsed)
            if path is not None:
                reason = (
                    f"inline_agents_disabled: inline AgentSpec at {path}; use a registered "
                    "agent name"
                )
        if reason is not None:
            return CheckResult(spec=parsed, spec_hash=digest, reason=reason)
        try:
            validate_names(parsed, callable_registry=self._callables, agent_registry=self._agents)
            topology_from_spec(
                parsed,
                callable_registry=self._callables,
                agent_registry=self._agents,
                agent_factory=self._agent_factory,
            )
        except UnknownNamesError as exc:
            return CheckResult(
                spec=parsed,
                spec_hash=digest,
                reason=f"unknown_names: {exc}",
                unknown_names=tuple(exc.unknown),
            )
        except Exception as exc:  # a proposal must never crash the search
            return CheckResult(
                spec=parsed,
                spec_hash=digest,
                reason=f"hydration_error: {type(exc).__name__}: {exc}",
            )
        return CheckResult(spec=parsed, spec_hash=digest)
