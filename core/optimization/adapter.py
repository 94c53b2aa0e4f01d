"""`PromptAdapter`: gepa's `GEPAAdapter` protocol over our `TopologyEvaluator`.

GEPA (gepa 0.1.4, `gepa/core/adapter.py`) calls `evaluate(batch, candidate, capture_traces)` and
`make_reflective_dataset(candidate, eval_batch, components_to_update)` synchronously. The
adapter runs one fixed topology with the candidate's prompts as prompt overrides
(`Genome.prompt_overrides`) through `TopologyEvaluator.evaluate`, which is async.

Threading: GEPA runs in a worker thread; our coroutines run on the event loop given to the
adapter (`loop`), submitted with `asyncio.run_coroutine_threadsafe` and waited for from the GEPA
thread. The loop must be running in another thread (the caller's, awaiting the worker thread):
calling `evaluate` on the loop's own thread would deadlock, so it is refused with a
`RuntimeError`.

Per example: the score GEPA sees is the example's accuracy (0 for a failed run: GEPA's rule
that per-example failures never raise); the output is the run's output summary; the trajectory
(with `capture_traces`) holds the example's input, expected answer, output, accuracy, error and
each agent's `(input, output)` from the run's trace spans.

Resume: with a `PromptCallLog` (`call_log=`), every evaluation's answer is appended to it, and a
question already recorded (same candidate texts, example ids and `capture_traces`) is answered
from the log without running anything; its recorded metric calls, model requests and USD still
count in the totals, so a resumed run's totals equal the uninterrupted run's
(`replayed_metric_calls` says how many were answered from the log).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from gepa.core.adapter import EvaluationBatch

from core.agents.overrides import parse_prompt_target
from core.agents.prompt import render_prompt
from core.evaluation._run import example_key
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.ir.models import TopologySpec
from core.optimization.genes import Genome
from core.optimization.replay import PromptCallLog, call_key

__all__ = ["PromptAdapter"]


class PromptAdapter:
    """GEPA's adapter for the prompts of one topology (see the module docstring).

    Args:
        evaluator: runs the topology (its registries, score function, pricer, cache).
        spec: the topology whose prompts evolve (phase 1's winner).
        genome: the prompt genes; GEPA's components are its gene names.
        loop: the running event loop the evaluator's coroutines are run on.
        call_log: where answers are recorded and, on resume, replayed from; None: no record.
    """

    propose_new_texts = None
    """No custom proposer: GEPA's reflection LM proposes new texts."""

    def __init__(
        self,
        evaluator: TopologyEvaluator,
        spec: TopologySpec,
        genome: Genome,
        loop: asyncio.AbstractEventLoop,
        call_log: PromptCallLog | None = None,
    ) -> None:
        self._evaluator = evaluator.with_options(capture_traces=True)
        self._spec = spec
        self._genome = genome
        self._loop = loop
        self._log = call_log
        self.replayed_metric_calls = 0
        """Metric calls answered from `call_log` (made before an interruption, not again)."""
        self.metric_calls = 0
        """Examples evaluated so far (GEPA's metric calls as this adapter counts them)."""
        self.model_requests = 0
        """Model requests made by the evaluations so far (cache hits excluded)."""
        self.cost_usd = 0.0
        """USD spent by the evaluations so far (cache hits excluded)."""

    def close_workers(self) -> None:
        """Kill the forked evaluation workers of this adapter's evaluator (its own
        `with_options` copy), if any (`TopologyEvaluator.close_workers`)."""
        self._evaluator.close_workers()

    def _run(self, coro: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop or threading.current_thread() is getattr(
            self._loop, "_thread", None
        ):
            coro.close()
            raise RuntimeError("PromptAdapter.evaluate must be called from GEPA's worker thread")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def evaluate(
        self,
        batch: list[GoldExample],
        candidate: dict[str, str],
        capture_traces: bool = False,
    ) -> EvaluationBatch[dict[str, Any], str]:
        """Run the candidate's prompts on `batch`: one output, score and (with
        `capture_traces`) trajectory per example, in order; answered from the call log when
        it holds this question."""
        key = call_key(
            "evaluate",
            {
                "candidate": candidate,
                "batch": [example_key(e) for e in batch],
                "traces": capture_traces,
            },
        )
        recorded = None if self._log is None else self._log.take(key)
        if recorded is not None:
            self.metric_calls += recorded["metric_calls"]
            self.replayed_metric_calls += recorded["metric_calls"]
            self.model_requests += recorded["model_requests"]
            self.cost_usd += recorded["cost_usd"]
            return EvaluationBatch(
                outputs=list(recorded["outputs"]),
                scores=list(recorded["scores"]),
                trajectories=recorded["trajectories"],
            )
        answer = self._evaluate_live(batch, candidate, capture_traces)
        if self._log is not None:
            self._log.append("evaluate", key, answer)
        self.metric_calls += answer["metric_calls"]
        self.model_requests += answer["model_requests"]
        self.cost_usd += answer["cost_usd"]
        return EvaluationBatch(
            outputs=answer["outputs"],
            scores=answer["scores"],
            trajectories=answer["trajectories"],
        )

    def _evaluate_live(
        self, batch: list[GoldExample], candidate: dict[str, str], capture_traces: bool
    ) -> dict[str, Any]:
        overrides = self._genome.prompt_overrides(candidate)
        unique = list({example_key(e): e for e in batch}.values())  # GEPA pads minibatches
        ev = self._run(self._evaluator.evaluate(self._spec, unique, prompt_overrides=overrides))
        outputs: list[str] = []
        scores: list[float] = []
        trajectories: list[dict[str, Any]] = []
        by_id = {r.example_id: r for r in ev.results if r.trial == 0}
        for example in batch:
            result = by_id.get(example_key(example))
            if result is None:  # rejected before running: every example fails alike
                output, score, error = "", 0.0, ev.reason or "rejected"
                spans: list[dict[str, Any]] = []
            else:
                output = result.output_summary
                acc = result.accuracy
                score = acc if result.status == "ok" and acc == acc else 0.0
                error = result.error
                spans = result.trace
            outputs.append(output)
            scores.append(score)
            trajectories.append(
                {
                    "input": render_prompt(example.input),
                    "expected": render_prompt(example.expected),
                    "output": output,
                    "score": score,
                    "error": error,
                    "agents": [
                        [s["name"], s["input_summary"], s["output_summary"]]
                        for s in spans
                        if s.get("kind") == "agent_step"
                    ],
                }
            )
        return {
            "outputs": outputs,
            "scores": scores,
            "trajectories": trajectories if capture_traces else None,
            "metric_calls": len(batch),
            "model_requests": ev.n_model_requests,
            "cost_usd": ev.fresh_cost_usd,
        }

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[dict[str, Any], str],
        components_to_update: list[str],
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """Per component (a prompt gene), one record per example: `Inputs` (what that agent
        was given, else the example's input), `Generated Outputs` (what it answered, else the
        topology's output) and `Feedback` (score, expected answer, error)."""
        dataset: dict[str, list[dict[str, Any]]] = {}
        for component in components_to_update:
            agent = parse_prompt_target(component)[0]
            records: list[dict[str, Any]] = []
            for t in eval_batch.trajectories or []:
                seen = [(i, o) for name, i, o in t["agents"] if name == agent]
                given, answered = seen[-1] if seen else (t["input"], t["output"])
                verdict = "correct" if t["score"] >= 1.0 else "incorrect"
                feedback = f"{verdict} (score {t['score']:g}); expected answer: {t['expected']}"
                if t["error"]:
                    feedback += f"; error: {t['error']}"
                records.append(
                    {"Inputs": given, "Generated Outputs": answered, "Feedback": feedback}
                )
            dataset[component] = records
        return dataset
