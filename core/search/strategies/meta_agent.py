"""`MetaAgentSearch`: the ADAS-style designer loop on a pydantic-ai agent (semantics section 8).

Kept whole: the four steps of a generation (design, reflexion, check, debug) share one designer
conversation and its spend, read in order in one class; the prompts and helpers are short.

Per generation the designer (a pydantic-ai `Agent` with `output_type=TopologyDesign`, any
`provider:model` string or a `Model` object) is shown the registered names with descriptions
and roles, the topology JSON schema, the constraints, the depth limit, the allowed kinds and
the archive view (per `archive_strategy`) with each entry's metrics, and:

1. **design**: proposes a `TopologyDesign(thought, spec)`;
2. **reflexion** x `reflexion_passes`: is asked to critique and revise its design (continuing
   the conversation); a revision with a different canonical spec replaces the design;
3. **check**: the design is checked exactly as the engine will (parse limits, `max_depth`,
   allowed kinds, registered names, hydration);
4. **debug** x up to `debug_max`: on failure (an output pydantic-ai could not validate, or
   not even process, e.g. arguments nested too deeply; or a check failure) the designer is fed
   the full error text (our own parse: the limit and the JSON path for a too-deep or too-big
   design) together with the allowed names, and asked for a corrected design.

The result is one `Proposal` per generation: the valid design, or (after the debug rounds) a
rejected one with its reason and raw text. Its `parent_idx` is the incumbent, the best
candidate on the full validation split, which the design must beat on the minibatch to be
promoted.

Cost (F3): every designer call gets a fresh `RunUsage` passed to `agent.run(..., usage=...)`,
which pydantic-ai fills in place, so its usage counts even when the run raises (structured-output
retries included). Each call's usage is priced with the `Pricer` and summed (`math.fsum`) into
the proposal's `design_cost_usd`, its requests and tokens into `design_requests`,
`design_input_tokens` and `design_output_tokens`.

Reference-library form: `MetaAgentSearch(config, gene=..., evaluator=...,
meta_agent_model="openai:gpt-4.1", api_key=..., bus=...)` then `await search.run(trainset=...,
valset=...)`. `meta_agent_model` is the same as `model`; an `api_key` is handed to the model's
provider when the model is built (at construction) and is neither kept on the search nor
logged. A `bus` receives `meta_agent.iteration_completed` per candidate of a generation and
`meta_agent.debug_retry` before each debug retry: an event bus (anything with
`emit(topic, payload)`, such as `core.autonomy.EventBus`) gets the event type as the topic and
the event's `data` as the payload; a plain callable gets the `MetaAgentEvent`. An awaitable
result is awaited.

Fail fast (F2): `preflight` checks the designer's output schema against its provider profile
(`core.ir.design.check_output_schema`) and that the designer's model has a price, then builds
(never calls) the designer's model and agent, before any evaluation or paid call: a provider that
cannot be set up (e.g. `openai:gpt-4o` without `OPENAI_API_KEY`, which pydantic-ai refuses with a
`UserError` when it constructs the provider) fails the run before the seed is evaluated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, infer_model, infer_model_profile, parse_model_id
from pydantic_ai.providers import infer_provider_class
from pydantic_ai.usage import RunUsage

from core.agents.providers import call_with_retries, current_policy, missing_setting
from core.agents.usage import model_name
from core.errors import ProviderError, SearchError, SpecError
from core.evaluation.pricing import Pricer
from core.ir.canonical import spec_hash
from core.ir.design import TopologyDesign, check_output_schema, parse_design
from core.ir.schema import topology_json_schema
from core.runtime.tracing import ModelUsage
from core.search.archive import view_indices
from core.search.strategies.base import (
    AskContext,
    Proposal,
    SearchSpace,
    Strategy,
    StrategyConfig,
)

if TYPE_CHECKING:
    from core.evaluation.evaluator import TopologyEvaluator
    from core.evaluation.metrics import GoldExample
    from core.hydrate import AgentRegistryLike, CallableRegistryLike
    from core.search.budget import Budget
    from core.search.gene import TopologyGene
    from core.search.result import CandidateRecord, OptimizationResult

__all__ = ["EventSink", "MetaAgentConfig", "MetaAgentEvent", "MetaAgentSearch"]

_ROLE_USE = {
    "step": "function_step.callable_name",
    "merge": "parallel.merge",
    "condition": "route.condition_name",
    "classifier": "router.classifier",
    "evaluator": "refinement_loop.evaluator",
    "state_updater": "refinement_loop.state_updater_name",
}

_RAW_CHARS = 4000
"""Raw designer output kept on a rejected proposal, in characters."""

_KEYLESS_HINT = "To try Pydantic AI without an API key"
"""Start of the advice pydantic-ai appends to a missing-key error (about its own `Agent('test')`,
not something a search can use): cut from our message."""

_MODEL_EXAMPLES = "openai:gpt-4o-mini or ollama:llama3.1"
"""Designer model names shown when a name is not one."""


class MetaAgentConfig(StrategyConfig):
    """The meta agent's options (semantics section 8 defaults); values are checked."""

    n_generations: int = Field(default=10, ge=1)  # pyright: ignore[reportIncompatibleVariableOverride]
    """Generations to run; each designs one candidate."""
    reflexion_passes: int = Field(default=2, ge=0)
    """Critique-and-revise rounds after each design."""
    debug_max: int = Field(default=3, ge=0)
    """Debug retries for a design that fails its checks (fed the error and the allowed names)."""
    output_retries: int = Field(default=1, ge=0)
    """pydantic-ai's own retries of an output it cannot validate, per designer call."""

    def replace(self, **changes: Any) -> MetaAgentConfig:
        """A copy with `changes` applied and validated (`dataclasses.replace(config, ...)`
        does the same).

        Raises:
            pydantic.ValidationError: an unknown option or a value out of range.
        """
        return type(self).model_validate({**self.model_dump(), **changes})


def _dataclass_fields(model: type[BaseModel]) -> dict[str, dataclasses.Field[Any]]:
    """`__dataclass_fields__` for a Pydantic model: its fields, as a dataclass would list them.

    With it, `dataclasses.replace`, `dataclasses.fields` and `dataclasses.asdict` work on the
    model as on the reference library's dataclass; `replace` calls the model's constructor, so
    the new values are validated.
    """
    names = list(model.model_fields)
    shape = dataclasses.make_dataclass(
        f"_{model.__name__}Fields", [(n, Any, dataclasses.field(default=None)) for n in names]
    )
    return {f.name: f for f in dataclasses.fields(shape)}


MetaAgentConfig.__dataclass_fields__ = _dataclass_fields(MetaAgentConfig)  # pyright: ignore[reportAttributeAccessIssue]


class MetaAgentEvent(BaseModel):
    """One event a `MetaAgentSearch` publishes on its `bus`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    event_type: str
    """`"meta_agent.iteration_completed"` or `"meta_agent.debug_retry"`."""
    agent_name: str = "meta_agent"
    """Who published it."""
    data: dict[str, Any] = Field(default_factory=dict[str, Any])
    """For `iteration_completed`: `generation`, `candidate_idx`, `status` (`"evaluated"`,
    `"rejected"`, `"duplicate"`), `score` (aggregate, None when not evaluated), `split`,
    `reason`. For `debug_retry`: `generation`, `attempt` (1-based), `error`."""


@runtime_checkable
class EventSink(Protocol):
    """An event bus: anything with `emit(topic, payload)` (the result may be awaitable), such
    as `core.autonomy.EventBus`."""

    def emit(self, topic: str, payload: Mapping[str, Any] | None = None) -> Any: ...


BusLike = EventSink | Callable[[MetaAgentEvent], Any]
"""A `bus`: an `EventSink`, or a callable taking each `MetaAgentEvent`."""


@dataclass(slots=True)
class _Spend:
    """Usage of one proposal's designer calls."""

    costs: list[float] = field(default_factory=list[float])
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def usd(self) -> float:
        return math.fsum(self.costs)


@dataclass(slots=True)
class _Call:
    """One designer call's outcome."""

    design: TopologyDesign | None
    history: list[ModelMessage] | None
    error: str | None
    raw: str


class MetaAgentSearch(Strategy):
    """The ADAS-style meta agent search (see the module docstring).

    Use it as a strategy (`run_search(problem, "meta_agent", model=...)`), or on its own with
    `optimize(...)` or `run(trainset, valset)` given a gene and an evaluator.

    Args:
        config: the options (default `MetaAgentConfig()`).
        gene: the searched topology (needed by `optimize` only).
        evaluator: the evaluator (needed by `optimize` only).
        model: the designer's model: a pydantic-ai `provider:model` string (e.g.
            `"openai:gpt-4o"`, `"ollama:qwen2.5"`) or a `Model` (tests: `FunctionModel`).
        meta_agent_model: the same as `model` (the reference library's name); give one.
        api_key: the API key for a `provider:model` string: handed to the provider, which is
            built now; never stored on the search, logged or recorded.
        bus: receives a `MetaAgentEvent` per generation's candidate and per debug retry (see
            the module docstring).
        pricer: prices the designer's usage (default `Pricer()`: genai-prices; in-process fake
            models are free unless the table prices them).
        strict: the `strict` setting of the output schema (pydantic-ai's default None).

    Raises:
        SearchError: neither or both of `model` and `meta_agent_model`; with an `api_key`, a
            model name that is not `provider:model`, a provider that takes no API key, or one
            that cannot be built.
    """

    name: ClassVar[str] = "meta_agent"
    config: MetaAgentConfig

    def __init__(
        self,
        config: MetaAgentConfig | None = None,
        gene: TopologyGene | None = None,
        evaluator: TopologyEvaluator | None = None,
        *,
        model: str | Model | None = None,
        meta_agent_model: str | Model | None = None,
        api_key: str | None = None,
        bus: BusLike | None = None,
        pricer: Pricer | None = None,
        strict: bool | None = None,
    ) -> None:
        super().__init__(config or MetaAgentConfig())
        if (model is None) == (meta_agent_model is None):
            raise SearchError(
                "give the designer's model once: model= or meta_agent_model= (the same thing)"
            )
        chosen = cast("str | Model", model if model is not None else meta_agent_model)
        self.gene = gene
        self.evaluator = evaluator
        self.model: str | Model = chosen
        self.model_name = model_name(chosen)
        self.bus = bus
        self._pending: set[asyncio.Task[Any]] = set()
        if api_key is not None and isinstance(chosen, str):
            self._check_name()
            self.model = self._build_model(api_key)
        self.pricer = pricer if pricer is not None else Pricer()
        self.strict = strict
        self._agent: Agent[None, TopologyDesign] | None = None
        self._instructions = ""

    # -- the contract ------------------------------------------------------------------------

    def preflight(self, space: SearchSpace) -> None:
        """F2: the designer's provider must take the output schema; its model must be priced
        and must build.

        The model is built (pydantic-ai's `infer_model`: provider, client, credentials read
        from the environment), never called, together with the designer agent the run will use.

        Raises:
            SearchError: the name is not a `provider:model` name (`designer model 'bogus' is
                not a provider:model name: ...`) or names a provider pydantic-ai does not know,
                the schema breaks under the provider's profile, the provider's package is
                missing, the model has no price, or the model cannot be built, e.g. a
                missing API key: `designer model 'openai:gpt-4o' cannot be built: the
                OPENAI_API_KEY environment variable is not set (set it, or choose another
                designer model)`; pydantic-ai's error is chained.
        """
        self._check_name()
        try:
            target: Any = (
                infer_model_profile(self.model) if isinstance(self.model, str) else self.model
            )
        except ImportError as exc:
            raise SearchError(f"designer model {self.model_name!r}: {exc}") from exc
        check_output_schema(target, strict=self.strict)
        quote = self.pricer.quote(ModelUsage(self.model_name, 1, 1, 1))
        if quote.reason is not None:
            raise SearchError(
                f"designer model {self.model_name!r} has no price ({quote.reason}): add it to "
                "the problem's [models.prices] table, or price unknown models as zero"
            )
        self._instructions = self.instructions(space)
        self._agent = self._new_designer(self._build_model())

    async def ask(self, ctx: AskContext) -> list[Proposal]:
        """One design per generation (or the recorded one, when resuming)."""
        recorded = ctx.recorded.get(ctx.next_candidate_idx)
        if recorded is not None:
            return [recorded]
        if not self._instructions:
            self._instructions = self.instructions(ctx.space)
        parent = _incumbent(ctx)
        spend = _Spend()
        prompt = self.design_prompt(ctx)
        call = await self._call(prompt, None, spend)
        current = call
        for _ in range(self.config.reflexion_passes):
            if current.design is None:
                break
            revised = await self._call(self.reflexion_prompt(), current.history, spend)
            if revised.design is None:
                continue  # a failed revision keeps the design (its cost is counted)
            if spec_hash(revised.design.spec) != spec_hash(current.design.spec):
                current = revised
            else:
                current = _Call(current.design, revised.history, None, current.raw)
        error: str
        attempt = 0
        while True:
            if current.design is not None:
                check = ctx.check(current.design.spec)
                if check.ok:
                    await self._drain()
                    return [
                        Proposal(
                            spec=current.design.spec,
                            parent_idx=parent,
                            operator="meta_agent",
                            thought=current.design.thought,
                            design_cost_usd=spend.usd,
                            design_requests=spend.requests,
                            design_input_tokens=spend.input_tokens,
                            design_output_tokens=spend.output_tokens,
                        )
                    ]
                error = check.reason or "invalid design"
            else:
                error = current.error or "no design"
            if attempt >= self.config.debug_max:
                return [
                    Proposal(
                        text=current.raw[:_RAW_CHARS],
                        parent_idx=parent,
                        operator="meta_agent",
                        thought="" if current.design is None else current.design.thought,
                        design_cost_usd=spend.usd,
                        design_requests=spend.requests,
                        design_input_tokens=spend.input_tokens,
                        design_output_tokens=spend.output_tokens,
                        reason=(
                            f"no_valid_design: still invalid after {attempt} debug "
                            f"retr{'y' if attempt == 1 else 'ies'}: {error}"
                        ),
                    )
                ]
            attempt += 1
            self._publish(
                "meta_agent.debug_retry",
                {"generation": ctx.generation, "attempt": attempt, "error": error},
            )
            await self._drain()
            history = current.history
            debug = self.debug_prompt(error, ctx.space)
            if history is None:
                debug = prompt + "\n\n" + debug
            retry = await self._call(debug, history, spend)
            if retry.design is not None or retry.history is not None:
                current = retry
            else:
                current = _Call(None, history, retry.error, retry.raw)

    # -- prompts -----------------------------------------------------------------------------

    def instructions(self, space: SearchSpace) -> str:
        """The designer's system instructions: building blocks, rules, constraints, schema."""
        gene = space.gene
        lines = [
            "You design agent topologies: compositions of registered agents and functions, "
            "written as JSON. A topology is run on each task input; its final output is scored.",
        ]
        if space.problem_description:
            lines += ["", f"The task: {space.problem_description}"]
        lines += ["", "Agents (use in agent_step.agent_name, router.classifier, "]
        lines[-1] += "refinement_loop.evaluator):"
        lines += [f"- {a.name}: {a.description}" for a in space.agents] or ["- (none)"]
        lines += ["", "Functions, with the roles they may play:"]
        for c in space.callables:
            roles = ", ".join(c.roles) or "none"
            lines.append(f"- {c.name} [{roles}]: {c.description}")
        if not space.callables:
            lines.append("- (none)")
        lines += ["", "Where each role goes:"]
        lines += [f"- {role}: {where}" for role, where in _ROLE_USE.items()]
        lines += [
            "- parallel.merge may also be a built-in: collect_all, first_wins, fastest",
            "",
            "Rules:",
            "- the top level is a pipeline, parallel, router or refinement_loop",
            f"- nesting depth at most {gene.max_depth} (an agent or function step is depth 0; "
            "each composite around it adds 1)",
            f"- allowed step kinds: {', '.join(gene.allowed_step_kinds)} (composites are "
            "allowed unless listed otherwise)",
            "- use only the names listed above, each in one of its roles; no inline agents",
        ]
        if gene.constraints:
            lines.append(f"- {gene.constraints}")
        lines += [
            "",
            "The JSON schema of a topology:",
            json.dumps(topology_json_schema(), sort_keys=True, separators=(",", ":")),
            "",
            "Answer with a TopologyDesign: `thought` (your reasoning) and `spec` (the topology).",
        ]
        return "\n".join(lines)

    def design_prompt(self, ctx: AskContext) -> str:
        """The generation's prompt: the archive view with metrics, then the request."""
        archive = ctx.archive
        entries = archive.entries
        shown = view_indices(entries, archive.strategy, archive.size)
        w = self.config.weights
        lines = [
            f"Generation {ctx.generation}. The archive holds {len(entries)} evaluated "
            f"topologies; you are shown {len(shown)} ({archive.strategy} view). Scores are "
            f"aggregate scores (higher is better: {w.accuracy:g} x accuracy {w.cost_usd:+g} x "
            f"cost in USD per example {w.latency_ms:+g} x latency in ms), on the split named.",
            "",
        ]
        for rank, a_idx in enumerate(shown, start=1):
            e = entries[a_idx]
            cand = ctx.archive_candidates[a_idx] if a_idx < len(ctx.archive_candidates) else a_idx
            if e.valid:
                metrics = (
                    f"score {e.aggregate_score:.4f}, accuracy {e.objective('accuracy'):.3f}, "
                    f"cost ${e.objective('cost_usd'):.6f}/example, latency "
                    f"{e.objective('latency_ms'):.0f} ms, agents {e.n_agents}, depth {e.depth}"
                )
            else:
                metrics = f"INVALID: {e.invalid_reason}"
            lines.append(
                f"[{rank}] candidate {cand} (generation {e.generation}, {e.split}, "
                f"{e.n_examples} examples): {metrics}"
            )
            if e.thought:
                lines.append(f"thought: {e.thought}")
            lines.append(f"spec: {e.spec_json}")
            lines.append("")
        lines.append(
            "Design a new topology that scores higher than every archived one. Learn from the "
            "archive; do not repeat an archived design. Think about which agents are right on "
            "which inputs, about checks, ensembles and cascades, and about cost and latency."
        )
        return "\n".join(lines)

    def reflexion_prompt(self) -> str:
        """The critique-and-revise request (ADAS's reflexion)."""
        return (
            "Reflect on your design. Is it new compared with the archive? Does every name exist "
            "and play one of its listed roles? Is it within the depth limit and the rules? Will "
            "it run correctly on every input, and is it worth its cost and latency? Then answer "
            "with the improved design, or the same design if it is already right."
        )

    def debug_prompt(self, error: str, space: SearchSpace) -> str:
        """The debug request: the full error and the allowed names."""
        return (
            "Your design cannot be used. The error:\n"
            f"{error}\n\n"
            "Allowed names:\n"
            f"{space.allowed_names_text()}\n\n"
            f"Depth limit: {space.gene.max_depth}. Allowed step kinds: "
            f"{', '.join(space.gene.allowed_step_kinds)}.\n"
            "Answer with a corrected design."
        )

    # -- calls -------------------------------------------------------------------------------

    def _check_name(self) -> None:
        """A designer named by a string must be `provider:model` with a provider pydantic-ai
        knows (what `infer_model` requires; `"test"` is its test model), checked before the
        price, whose "no price" would otherwise be the first thing said about a misspelling.

        Raises:
            SearchError: no provider prefix or an empty part (`designer model 'bogus' is not a
                provider:model name: ...`), or an unknown provider (`designer model
                'nosuch:model' cannot be built: Unknown model: nosuch:model`).
        """
        if not isinstance(self.model, str) or self.model == "test":
            return
        provider, name = parse_model_id(self.model)
        if not provider or not name:
            raise SearchError(
                f"designer model {self.model!r} is not a provider:model name: give one such as "
                f"{_MODEL_EXAMPLES}"
            )
        try:
            infer_provider_class(provider)
        except ValueError:  # an unknown provider: say what pydantic-ai says, not "no price"
            self._build_model()  # raises "... cannot be built: Unknown model: ..."
        except ImportError as exc:
            raise SearchError(f"designer model {self.model_name!r}: {exc}") from exc

    def _build_model(self, api_key: str | None = None) -> Model:
        """The designer's model, built (not called); with `api_key`, its provider gets the key.

        Raises:
            SearchError: pydantic-ai cannot build it (a missing API key or base URL, an unknown
                provider, a missing provider package), naming the model and what to set.
        """
        try:
            if api_key is None or not isinstance(self.model, str):
                return infer_model(self.model)
            return infer_model(self.model, provider_factory=_keyed_provider(api_key))
        except TypeError as exc:  # the provider class takes no api_key
            raise SearchError(
                f"designer model {self.model_name!r}: its provider does not take an api_key "
                "(configure it through its environment variables instead)"
            ) from exc
        except UserError as exc:
            text = " ".join(str(exc).split())
            text = text.split(_KEYLESS_HINT, 1)[0].strip()
            setting = missing_setting(exc)
            if setting is None:
                raise SearchError(
                    f"designer model {self.model_name!r} cannot be built: {text}"
                ) from exc
            raise SearchError(
                f"designer model {self.model_name!r} cannot be built: the {setting} environment "
                "variable is not set (set it, or choose another designer model)"
            ) from exc
        except ImportError as exc:
            raise SearchError(f"designer model {self.model_name!r}: {exc}") from exc

    def _new_designer(self, model: Model) -> Agent[None, TopologyDesign]:
        return Agent(
            model,
            output_type=TopologyDesign,
            instructions=self._instructions,
            retries=self.config.output_retries,
            name="designer",
            model_settings=current_policy().model_settings(),
        )

    def _designer(self) -> Agent[None, TopologyDesign]:
        if self._agent is None:  # asked without a preflight
            self._agent = self._new_designer(self._build_model())
        return self._agent

    async def _call(
        self, prompt: str, history: Sequence[ModelMessage] | None, spend: _Spend
    ) -> _Call:
        """One designer run, its usage always counted.

        An output pydantic-ai could not validate (after its own retries) is returned as a
        failed call, for a debug retry. Anything else (no API key, a provider or network error,
        requests forbidden) fails the run: retrying the design would not help.

        Raises:
            SearchError: the model call itself failed (chained to the cause).
        """
        agent = self._designer()
        usage = RunUsage()
        answers: list[ModelResponse] = []  # the designer's responses, before processing
        messages: list[ModelMessage] = []

        async def attempt() -> Any:
            answers.clear()
            with capture_run_messages() as captured:
                messages[:] = captured  # the list pydantic-ai fills (this attempt's run)
                try:
                    async with agent.iter(
                        prompt, message_history=list(history) if history else None, usage=usage
                    ) as run:
                        async for node in run:
                            if Agent.is_call_tools_node(node):
                                answers.append(node.model_response)
                finally:
                    messages[:] = captured
            return run.result

        try:
            result = await call_with_retries(attempt, model=self.model_name)
            if result is None:  # pragma: no cover - a finished run always has a result
                raise SearchError("the designer's run ended without a result")
        except ProviderError:
            raise  # persistent: the run stops, resumable
        except UnexpectedModelBehavior as exc:  # an output it could not validate
            raw = _last_output(messages)
            return _Call(None, None, _failure_text(exc, raw, messages), raw)
        except (ValueError, RecursionError) as exc:
            if not answers:
                raise SearchError(
                    f"the designer's model call failed ({self.model_name}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            # the designer answered and processing the answer failed: pydantic-ai cannot
            # serialize arguments nested too deeply (a provider that delivers parsed
            # arguments, e.g. a dict 300 levels deep). A bad design, not a failed call:
            # a debug retry with our own limit error.
            output = _output_of(answers[-1])
            raw = _dumps(output)
            return _Call(None, None, _failure_text(exc, raw, messages, output), raw)
        except SearchError:
            raise
        except Exception as exc:
            raise SearchError(
                f"the designer's model call failed ({self.model_name}): {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self._spend(usage, spend)
        design = result.output
        return _Call(design, result.all_messages(), None, design.model_dump_json())

    def _spend(self, usage: RunUsage, spend: _Spend) -> None:
        if not (usage.requests or usage.input_tokens or usage.output_tokens):
            return
        quote = self.pricer.quote(
            ModelUsage(self.model_name, usage.requests, usage.input_tokens, usage.output_tokens)
        )
        cost = quote.cost_usd if math.isfinite(quote.cost_usd) else 0.0
        spend.costs.append(cost)
        spend.requests += usage.requests
        spend.input_tokens += usage.input_tokens
        spend.output_tokens += usage.output_tokens

    # -- the bus -----------------------------------------------------------------------------

    def tell(self, records: Sequence[CandidateRecord]) -> None:
        """Publishes `meta_agent.iteration_completed` per candidate on the bus, if any."""
        for r in records:
            self._publish(
                "meta_agent.iteration_completed",
                {
                    "generation": r.generation,
                    "candidate_idx": r.candidate_idx,
                    "status": r.status,
                    "score": r.score,
                    "split": r.split,
                    "reason": r.reason,
                },
            )

    def _publish(self, event_type: str, data: dict[str, Any]) -> None:
        if self.bus is None:
            return
        event = MetaAgentEvent(event_type=event_type, data=data)
        sink = self.bus
        if isinstance(sink, EventSink):
            result = sink.emit(event_type, dict(data))
        else:
            result = sink(event)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _drain(self) -> None:
        """Wait for the bus's pending awaitable deliveries (a failing one raises here)."""
        while self._pending:
            await asyncio.gather(*list(self._pending))

    # -- running on its own ------------------------------------------------------------------

    async def run(
        self,
        trainset: Sequence[GoldExample],
        valset: Sequence[GoldExample] | None = None,
        **options: Any,
    ) -> OptimizationResult:
        """Run the search with the evaluator's registries (the reference library's form).

        The candidates are scored on `valset`, or on `trainset` when no `valset` (or an empty
        one) is given; `trainset` is otherwise unused, as in the reference library. `options`
        are `optimize`'s (`test`, `budget`, `subscribers`, ...).

        Raises:
            ValueError: `trainset` is empty.
            SearchError: no gene or evaluator was given.
        """
        if not trainset:
            raise ValueError("MetaAgentSearch.run: trainset must hold at least one GoldExample")
        if self.evaluator is None:
            raise SearchError("MetaAgentSearch.run needs the evaluator")
        validation = valset if valset else trainset
        result = await self.optimize(
            validation,
            callable_registry=self.evaluator.callable_registry,
            agent_registry=self.evaluator.agent_registry,
            **options,
        )
        await self._drain()
        return result

    async def optimize(
        self,
        validation: Sequence[GoldExample],
        *,
        callable_registry: CallableRegistryLike,
        agent_registry: AgentRegistryLike,
        test: Sequence[GoldExample] | None = None,
        budget: Budget | None = None,
        **options: Any,
    ) -> OptimizationResult:
        """Run the search with this strategy on `validation` (see `core.search.engine.SearchRun`
        for `options`: `roles`, `subscribers`, `run_id`, `resume_from`, `stop_file`, ...).

        Raises:
            SearchError: no gene or evaluator was given.
        """
        from core.search._engine import SearchRun

        if self.gene is None or self.evaluator is None:
            raise SearchError("MetaAgentSearch.optimize needs the gene and the evaluator")
        run = SearchRun(
            self,
            gene=self.gene,
            evaluator=self.evaluator,
            validation=validation,
            callable_registry=callable_registry,
            agent_registry=agent_registry,
            test=test,
            budget=budget,
            **options,
        )
        return await run.run()


def _keyed_provider(api_key: str) -> Callable[[str], Any]:
    """A pydantic-ai provider factory that hands `api_key` to the provider it builds."""

    def build(provider: str) -> Any:
        return infer_provider_class(provider)(api_key=api_key)  # pyright: ignore[reportCallIssue]

    return build


def _incumbent(ctx: AskContext) -> int | None:
    a_idx = ctx.archive.best_index("validation")
    if a_idx is None or a_idx >= len(ctx.archive_candidates):
        return None
    return ctx.archive_candidates[a_idx]


def _output_of(response: ModelResponse) -> Any:
    """A response's output: the first tool call's arguments (text or parsed) or text, else
    None."""
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            return part.args
        if isinstance(part, TextPart):
            return part.content
    return None


def _dumps(output: Any) -> str:
    """An output as text; "" when it is None or cannot be written (nested too deeply)."""
    if output is None or isinstance(output, str):
        return output or ""
    try:
        return json.dumps(output)
    except (ValueError, TypeError, RecursionError):
        return ""


def _last_output(messages: Sequence[ModelMessage]) -> str:
    """The designer's last output as text (tool-call arguments or text), "" if none."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return _dumps(_output_of(message))
    return ""


def _failure_text(
    exc: Exception, raw: str, messages: Sequence[ModelMessage], output: Any = None
) -> str:
    """The full error for a debug retry: our own parse of the last output when there is one
    (it names every problem with its JSON path, and the limit for a too-deep or too-big
    design), else pydantic-ai's feedback and message."""
    design: str | Mapping[str, Any] | None = raw if raw.strip() else None
    if design is None and isinstance(output, Mapping):
        design = cast(Mapping[str, Any], output)
    if design is not None:
        try:
            parse_design(design)
        except SpecError as err:
            return f"invalid_design: {err}"
        except Exception as err:  # pragma: no cover - parse_design raises SpecError only
            return f"invalid_design: {type(err).__name__}: {err}"
    feedback = ""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, RetryFeedbackPart):
                    feedback = part.model_response()
                elif isinstance(part, ToolReturnPart) and part.outcome != "success":
                    feedback = part.model_response_str()
            if feedback:
                break
    text = f"{type(exc).__name__}: {exc}"
    if not raw.strip():
        text = f"empty_design: the designer returned no design ({text})"
    return text + (f"; last feedback: {feedback}" if feedback else "")
