"""`Evaluator`: the reference library's prompt-evolution evaluator form, over `TopologyEvaluator`.

The reference guide's phase 2 builds `Evaluator(agent_factory=..., score_fn=...)` and hands it
to `OptimizationRunner`. Here `agent_factory` is a zero-argument callable returning the topology
whose prompts evolve (phase 1's winner: a `TopologySpec`, its JSON text or its JSON data); it is
called once, by `topology()`, when the runner is built. The topology is run by a
`TopologyEvaluator` built from the other arguments (its registries, pricer and options), so
scoring, pricing, caching and prompt overrides are exactly the topology search's.

Unlike the reference library, whose factories close over their own agents, our topologies name
their agents and functions: a topology with registered agents or functions needs
`agent_registry` / `callable_registry` (empty by default: a topology of inline `AgentSpec`s
needs only `inline_agent_factory`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from core.errors import OptimizationError
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import ScoreFn
from core.hydrate import AgentRegistryLike, CallableRegistryLike, InlineAgentFactory
from core.ir.models import TopologySpec

__all__ = ["Evaluator"]

_SPEC: TypeAdapter[TopologySpec] = TypeAdapter(TopologySpec)


class Evaluator:
    """The topology to tune and how to score it (see the module docstring).

    Args:
        agent_factory: `() -> TopologySpec` (or its JSON text, or a mapping of its JSON data).
        score_fn: `(output, example) -> float in [0, 1]`, sync or async.
        callable_registry: the functions the topology names (default: none).
        agent_registry: the agent factories the topology names (default: none).
        inline_agent_factory: builds inline `AgentSpec`s (allows inline agents when given).
        **options: any other `TopologyEvaluator` option (`pricer`, `concurrency`, `cache`,
            `timer`, ...), passed unchanged.

    Raises:
        OptimizationError: `agent_factory` is not callable.
        EvaluationError, pydantic.ValidationError: as `TopologyEvaluator` for the options.
    """

    def __init__(
        self,
        agent_factory: Callable[[], Any],
        score_fn: ScoreFn,
        *,
        callable_registry: CallableRegistryLike | None = None,
        agent_registry: AgentRegistryLike | None = None,
        inline_agent_factory: InlineAgentFactory | None = None,
        **options: Any,
    ) -> None:
        if not callable(agent_factory):
            raise OptimizationError(
                f"Evaluator(agent_factory=...) must be a zero-argument callable returning the "
                f"topology to tune; got a {type(agent_factory).__name__}"
            )
        if inline_agent_factory is not None:
            options.setdefault("allow_inline_agents", True)
        self.agent_factory = agent_factory
        """The callable giving the topology (called by `topology()`)."""
        self.topology_evaluator = TopologyEvaluator(
            callable_registry=callable_registry if callable_registry is not None else {},
            agent_registry=agent_registry if agent_registry is not None else {},
            score_fn=score_fn,
            agent_factory=inline_agent_factory,
            **options,
        )
        """The `TopologyEvaluator` that runs it."""

    def topology(self) -> TopologySpec:
        """Call `agent_factory` and validate what it returns as a `TopologySpec`.

        Raises:
            OptimizationError: it raised, or returned something that is not a topology (the
                message names what it returned and pydantic's first error).
        """
        try:
            made = self.agent_factory()
        except Exception as exc:
            raise OptimizationError(f"Evaluator.agent_factory() raised {exc!r}") from exc
        try:
            if isinstance(made, str | bytes):
                return _SPEC.validate_json(made)
            return _SPEC.validate_python(made)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise OptimizationError(
                f"Evaluator.agent_factory() returned a {type(made).__name__} that is not a "
                f"TopologySpec: {where}: {first['msg']}"
            ) from exc
