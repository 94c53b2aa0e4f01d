"""`OptimizationRunner`: GEPA prompt evolution on a fixed topology (phase 2 of two).

`await runner.optimize(trainset=..., valset=...)` runs `gepa.optimize` (synchronous) in a worker
thread (`asyncio.to_thread`) while this event loop stays free; the `PromptAdapter` and the
reflection LM submit their coroutines back to this loop (`asyncio.run_coroutine_threadsafe`).

Reference-library form: `OptimizationRunner(config, genome=..., evaluator=Evaluator(agent_factory=...,
score_fn=...), api_key=...)`: the topology comes from the `Evaluator`'s factory, and the
reflection model defaults to `DEFAULT_REFLECTION_MODEL`, built with `api_key` (handed to its
provider, never kept or logged), exactly as `MetaAgentSearch` builds its designer's model.

The reflection model is any pydantic-ai model (or `"provider:model"` string): GEPA's
`reflection_lm` (a callable `prompt -> str`) is a pydantic-ai `Agent` run per call, its usage
priced by the evaluator's `Pricer` like every other model call (`raw["budget_used"]`).

Scores: GEPA maximises the mean per-example accuracy (its `val_aggregate_scores`, deterministic:
no wall-clock term). Each candidate is then scored on the validation set by the evaluator, so
its `CandidateRecord.score` and the result's `best_score` are phase 1's aggregate score (the
problem's `MetricWeights`: accuracy, cost, latency), comparable with the topology search's; the
accuracy GEPA ranked by is `raw["gepa_best_accuracy"]` (and each record's `accuracy`).

Live progress: `optimize(..., on_candidate=fn)` calls `fn(PromptCandidate)` once per candidate,
as GEPA accepts it (a gepa callback, `on_valset_evaluated`: the seed after its validation pass,
each later candidate after its own), in candidate order, from GEPA's worker thread, after the
candidate is re-scored by the evaluator on the validation set (so the record carries phase 1's
aggregate score). A caller journals each one as it comes (`search --then-prompts` does), so the
studio's Live page shows prompt candidates while GEPA runs. The re-scoring happens at acceptance
instead of after GEPA: the same calls, in another order. An exception raised by `fn` stops GEPA
at its next iteration and is raised by `optimize` (gepa itself would only log it).

Resume: `optimize(..., call_log=PromptCallLog(path))` records every metric call, reflection and
final re-scoring as it is made; a run given a log that already holds answers (an interrupted
run's) replays them instead of calling any model again, then continues live, and ends with the
result the uninterrupted run would have (`core.optimization.replay`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from gepa.api import optimize as gepa_optimize  # pyright: ignore[reportUnknownVariableType]
from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model
from pydantic_ai.providers import infer_provider_class

from core.agents.providers import call_with_retries, current_policy
from core.agents.usage import model_name
from core.errors import OptimizationError, ProviderError
from core.evaluation._run import example_key
from core.evaluation.evaluator import TopologyEvaluator, prompted_hash
from core.evaluation.metrics import GoldExample
from core.ir import spec_hash
from core.ir.models import TopologySpec
from core.optimization.adapter import PromptAdapter
from core.optimization.config import OptimizationConfig
from core.optimization.evaluator import Evaluator
from core.optimization.genes import Genome, PromptGene
from core.optimization.replay import PromptCallLog, call_key, recorded_or_made
from core.runtime.tracing import ModelUsage
from core.search.result import CandidateRecord, OptimizationResult, RunDetails

__all__ = [
    "DEFAULT_REFLECTION_MODEL",
    "OptimizationRunner",
    "PromptCandidate",
    "build_reflection_model",
]

DEFAULT_REFLECTION_MODEL = "openai:gpt-4.1"
"""The reflection model when none is given (the reference guide's meta-agent model)."""


class PromptCandidate(BaseModel):
    """One prompt candidate as GEPA accepted it, scored: what `optimize(on_candidate=...)` gets."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    record: CandidateRecord
    """The candidate as the result's `history` will hold it: `score` is phase 1's aggregate
    score on the validation set, `accuracy` its accuracy (0..1)."""
    prompts: dict[str, str]
    """Gene name -> prompt text."""
    metric_calls: int
    """GEPA's metric calls spent when it found this candidate (its `discovery_eval_counts`
    entry: 0 for the seed)."""
    gepa_accuracy: float
    """GEPA's mean validation accuracy for it (what GEPA ranks by)."""


class _Accepted:
    """gepa callback: each candidate GEPA adds, re-scored and handed to `on_candidate`.

    gepa (0.1.4, `core/engine.py`) fires `on_valset_evaluated` for the seed (iteration 0) and
    for each candidate it adds, right after adding it; the metric calls at its discovery are
    `state.num_metric_calls_by_discovery[idx]` (the state comes with `on_iteration_start`; the
    seed's is 0). gepa catches a callback's `Exception` and only logs it, so one is kept in
    `error` and `should_stop` (a gepa stopper) ends the run at the next iteration.
    """

    def __init__(self, score: Callable[[int, dict[str, str], list[int], int, float], None]) -> None:
        self._score = score
        self._state: Any = None
        self.error: BaseException | None = None

    def on_iteration_start(self, event: Any) -> None:
        self._state = event["state"]

    def on_valset_evaluated(self, event: Any) -> None:
        if self.error is not None:
            return
        idx = int(event["candidate_idx"])
        found = self._state.num_metric_calls_by_discovery if self._state is not None else [0]
        try:
            self._score(
                idx,
                dict(event["candidate"]),
                [int(p) for p in event["parent_ids"] if p is not None],
                int(found[idx]) if idx < len(found) else 0,
                float(event["average_score"]),
            )
        except Exception as exc:  # noqa: BLE001 (raised again by optimize)
            self.error = exc

    def __call__(self, gepa_state: Any) -> bool:
        return self.error is not None


class _Silent:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


class OptimizationRunner:
    """Evolves the prompt genes of `genome` over topology `spec` with GEPA.

    Args:
        config: GEPA's knobs (`OptimizationConfig`).
        genome: prompt genes only, each `"<agent>.system_prompt"` of an agent `spec` runs.
        evaluator: runs the topology: a `TopologyEvaluator` (then give `spec`) or an
            `Evaluator` (the topology is its `agent_factory`'s; leave `spec` out).
        spec: the topology (phase 1's winner), kept fixed.
        reflection_model: a pydantic-ai `Model` or `"provider:model"` string; default
            `DEFAULT_REFLECTION_MODEL`.
        api_key: the key for a `"provider:model"` reflection model, handed to its provider when
            the model is built (here); None: the provider's environment variable.

    Raises:
        OptimizationError: a gene that is not a `PromptGene` (only prompts are evolved here);
            no `spec` with a `TopologyEvaluator`, or one as well as an `Evaluator`'s; the
            `Evaluator`'s topology is not one; the reflection model cannot be built (e.g. no
            API key: the message names the model and what to set).
    """

    def __init__(
        self,
        config: OptimizationConfig,
        *,
        genome: Genome,
        evaluator: TopologyEvaluator | Evaluator,
        spec: TopologySpec | None = None,
        reflection_model: Model | str | None = None,
        api_key: str | None = None,
    ) -> None:
        if isinstance(evaluator, Evaluator):
            if spec is not None:
                raise OptimizationError(
                    "give the topology once: an Evaluator's agent_factory gives it, so leave "
                    "spec= out"
                )
            spec = evaluator.topology()
            evaluator = evaluator.topology_evaluator
        elif spec is None:
            raise OptimizationError(
                "OptimizationRunner with a TopologyEvaluator needs spec= (the topology whose "
                "prompts evolve)"
            )
        others = [g.name for g in genome.genes if not isinstance(g, PromptGene)]
        if others:
            raise OptimizationError(
                f"only PromptGenes are evolved by OptimizationRunner; not prompts: {others}"
            )
        self._config = config
        self._genome = genome
        self._evaluator = evaluator
        self._spec = spec
        self._log = _Silent()
        chosen = reflection_model if reflection_model is not None else DEFAULT_REFLECTION_MODEL
        self._reflector: Agent[None, str] = Agent(
            build_reflection_model(chosen, api_key),
            name="gepa_reflection",
            model_settings=current_policy().model_settings(),
        )
        self._reflection_usage = ModelUsage(model_name=model_name(chosen))

    async def _reflect(self, prompt: str, log: PromptCallLog | None) -> str:
        async def make() -> dict[str, Any]:
            result = await call_with_retries(  # transient faults waited out, as everywhere
                lambda: self._reflector.run(prompt), model=self._reflection_usage.model_name
            )
            usage = result.usage
            return {
                "output": result.output,
                "requests": usage.requests,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }

        answer = await recorded_or_made(log, "reflect", call_key("reflect", prompt), make)
        self._reflection_usage.add(
            ModelUsage(
                model_name=self._reflection_usage.model_name,
                requests=int(answer["requests"]),
                input_tokens=int(answer["input_tokens"]),
                output_tokens=int(answer["output_tokens"]),
            )
        )
        return str(answer["output"])

    async def _rescore(
        self, candidate: dict[str, str], val: list[GoldExample], log: PromptCallLog | None
    ) -> dict[str, Any]:
        async def make() -> dict[str, Any]:
            ev = await self._evaluator.evaluate(
                self._spec, val, prompt_overrides=self._genome.prompt_overrides(candidate)
            )
            return {
                "accuracy": ev.accuracy,
                "aggregate_score": ev.aggregate_score,
                "cost_usd": ev.cost_usd,
                "latency_ms": ev.latency_ms,
                "n_agents": ev.n_agents,
                "depth": ev.depth,
                "valid": ev.valid,
            }

        key = call_key("rescore", {"candidate": candidate, "val": [example_key(e) for e in val]})
        return await recorded_or_made(log, "rescore", key, make)

    async def optimize(
        self,
        *,
        trainset: Sequence[GoldExample],
        valset: Sequence[GoldExample] | None = None,
        call_log: PromptCallLog | None = None,
        on_candidate: Callable[[PromptCandidate], None] | None = None,
    ) -> OptimizationResult:
        """Run GEPA; the result has the topology search's shape, genes mapped to prompt texts.

        `history` has one record per GEPA candidate (0 = the seed prompts) scored on the
        validation set (`valset`, else `trainset`); `raw` holds `strategy="gepa"`,
        `candidates` (gene name -> text each), `best_idx`, `log` (GEPA's log lines), `start_accuracy`, `end_accuracy`
        and `budget_used` (`metric_calls`, `model_requests`, `cost_usd`,
        `reflection_requests`, `reflection_input_tokens`, `reflection_output_tokens`,
        `reflection_cost_usd`, USD; `replayed_metric_calls`: those answered
        from `call_log`), `gepa_best_accuracy` (the mean validation accuracy GEPA chose the
        winner by) and `best_aggregate_score` (= `best_score`, phase 1's aggregate score).
        `pareto_candidates` holds only the winner for now (GEPA's per-example front is not
        mapped yet).

        `call_log`: records every answer and replays those it already holds (resume; see the
        module docstring). The caller closes it.

        `on_candidate`: called with each candidate as GEPA accepts it, from GEPA's worker
        thread, in candidate order (see the module docstring); a candidate gepa did not report
        (none known) is re-scored and reported after GEPA ends.

        Raises:
            Exception: whatever `on_candidate` raised (GEPA stopped at its next iteration).
        """
        loop = asyncio.get_running_loop()
        adapter = PromptAdapter(self._evaluator, self._spec, self._genome, loop, call_log)
        self._reflection_usage = ModelUsage(model_name=self._reflection_usage.model_name)
        val = list(valset) if valset is not None else list(trainset)
        base = spec_hash(self._spec)
        scored: dict[int, PromptCandidate] = {}

        async def score(
            idx: int, candidate: dict[str, str], parents: list[int], found: int, gepa_acc: float
        ) -> PromptCandidate:
            ev = await self._rescore(candidate, val, call_log)
            return PromptCandidate(
                record=CandidateRecord(
                    candidate_idx=idx,
                    generation=-1 if idx == 0 else idx - 1,
                    parent_idx=parents[0] if parents else None,
                    operator="seed" if idx == 0 else "gepa_reflection",
                    spec_hash=prompted_hash(base, self._genome.prompt_overrides(candidate)),
                    spec_json=self._spec.model_dump_json(),
                    split="validation",
                    score=ev["aggregate_score"],
                    accuracy=ev["accuracy"],
                    cost_usd=ev["cost_usd"],
                    latency_ms=ev["latency_ms"],
                    n_agents=ev["n_agents"],
                    depth=ev["depth"],
                    valid=ev["valid"],
                ),
                prompts=candidate,
                metric_calls=found,
                gepa_accuracy=gepa_acc,
            )

        def accepted(
            idx: int, candidate: dict[str, str], parents: list[int], found: int, gepa_acc: float
        ) -> None:
            if idx in scored:
                return
            made = asyncio.run_coroutine_threadsafe(
                score(idx, candidate, parents, found, gepa_acc), loop
            ).result()
            scored[idx] = made
            if on_candidate is not None:
                on_candidate(made)

        feed = _Accepted(accepted)

        def reflection_lm(prompt: Any) -> str:
            if feed.error is not None:  # stopping: no more calls to a provider that failed
                raise feed.error
            try:
                return asyncio.run_coroutine_threadsafe(
                    self._reflect(str(prompt), call_log), loop
                ).result()
            except ProviderError as exc:
                # gepa catches a failed proposal and goes on: keep it, so the stopper ends
                # the run at its next iteration and optimize raises it (phase 2 stops, resumable)
                feed.error = exc
                raise

        try:
            result = await asyncio.to_thread(  # pyright: ignore[reportUnknownArgumentType]
                gepa_optimize,  # pyright: ignore[reportUnknownArgumentType]
                seed_candidate=self._genome.encode(),
                trainset=list(trainset),
                valset=val,
                adapter=cast("Any", adapter),  # (gepa types propose_new_texts as a proposer)
                reflection_lm=reflection_lm,
                logger=self._log,
                callbacks=cast("Any", [feed]),  # (gepa types its protocol with every hook)
                stop_callbacks=[feed],
                **self._config.gepa_kwargs(),
            )
        finally:
            adapter.close_workers()  # (its evaluator's forked workers, if any: GEPA is done)
        if feed.error is not None:
            self._evaluator.close_workers()
            raise feed.error
        history: list[CandidateRecord] = []
        accuracies: list[float] = []
        for idx, candidate in enumerate(result.candidates):
            if idx not in scored:  # not reported by gepa: scored now, reported late
                made = await score(
                    idx,
                    dict(candidate),
                    [p for p in result.parents[idx] if p is not None],
                    int(result.discovery_eval_counts[idx]),
                    float(result.val_aggregate_scores[idx]),
                )
                scored[idx] = made
                if on_candidate is not None:
                    on_candidate(made)
            history.append(scored[idx].record)
            accuracies.append(_num(scored[idx].record.accuracy))
        self._evaluator.close_workers()  # the re-scoring is done: nothing more is evaluated
        best = result.best_idx
        best_candidate = dict(result.candidates[best])
        quote = self._evaluator.pricer.quote(self._reflection_usage)
        return OptimizationResult(
            best_candidate=best_candidate,
            best_decoded=self._genome.decode(best_candidate),
            best_score=_num(history[best].score),
            pareto_candidates=[best_candidate],
            history=history,
            raw=RunDetails(
                {
                    "strategy": "gepa",
                    "phase": "prompts",
                    "seed": self._config.seed,
                    "status": "completed",
                    "best_idx": best,
                    "candidates": [dict(c) for c in result.candidates],
                    # gepa's metric-call count when each candidate was found (its
                    # `discovery_eval_counts`): where the Live page's phase-2 chart puts it
                    "discovery_metric_calls": [int(n) for n in result.discovery_eval_counts],
                    "log": list(self._log.lines),
                    "start_accuracy": accuracies[0],
                    "end_accuracy": accuracies[best],
                    "gepa_best_accuracy": float(result.val_aggregate_scores[best]),
                    "best_aggregate_score": history[best].score,
                    "budget_used": {
                        "metric_calls": adapter.metric_calls,
                        "replayed_metric_calls": adapter.replayed_metric_calls,
                        "model_requests": adapter.model_requests,
                        "cost_usd": adapter.cost_usd,
                        "reflection_requests": self._reflection_usage.requests,
                        "reflection_input_tokens": self._reflection_usage.input_tokens,
                        "reflection_output_tokens": self._reflection_usage.output_tokens,
                        "reflection_cost_usd": quote.cost_usd
                        if math.isfinite(quote.cost_usd)
                        else math.nan,
                    },
                }
            ),
        )


def _num(value: float | None) -> float:
    return math.nan if value is None else value


def build_reflection_model(model: Model | str, api_key: str | None = None) -> Model:
    """`model` built (never called); a string's provider gets `api_key` when one is given.

    Raises:
        OptimizationError: pydantic-ai cannot build it (unknown model or provider, missing key,
            a provider that takes no key), naming the model.
    """
    if not isinstance(model, str):
        return model
    try:
        if api_key is None:
            return infer_model(model)

        def provider(name: str) -> Any:
            return infer_provider_class(name)(api_key=api_key)  # pyright: ignore[reportCallIssue]

        return infer_model(model, provider_factory=provider)
    except TypeError as exc:
        raise OptimizationError(
            f"reflection model {model!r}: its provider does not take an api_key (configure it "
            "through its environment variables instead)"
        ) from exc
    except (UserError, ValueError, ImportError) as exc:
        text = " ".join(str(exc).split())
        raise OptimizationError(f"reflection model {model!r} cannot be built: {text}") from exc
