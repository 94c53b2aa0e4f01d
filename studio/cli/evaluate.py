"""`evaluate PROBLEM SPEC.json`: one topology on a problem's examples, per example.

A spec that routes on learned conditions reads their artefacts from the `learned/` folder
beside the spec file (what `apply` writes beside a registry's `current.json`), digests checked.

Each example run's row, then the evaluation's scores; an example run that raised is shown by
its root cause (`root_cause`: the error under the pipeline's wrappers).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.agents.rate_budget import RateBudget
from core.errors import SpecError
from core.evaluation.evaluator import CandidateEvaluation, ExampleResult, TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.ir import TopologySpec, parse_topology
from core.problems import Problem, load_problem
from core.search.learned import LEARNED_FOLDER, learned_names, load_applied
from studio.cli._common import CliUsageError, ExitCode
from studio.cli._executor import effective_rate_limits, make_executor
from studio.cli._output import Output, fmt_float
from studio.cli._report import structure_line
from studio.cli._setup import problem_overrides

__all__ = [
    "cmd_evaluate",
    "root_cause",
]


def _read_spec(path_text: str) -> TopologySpec:
    if path_text == "-":
        text = sys.stdin.read()
        where = "stdin"
    else:
        path = Path(path_text)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CliUsageError(f"spec file {path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CliUsageError(f"cannot read spec file {path}: {exc}") from exc
        where = str(path)
    try:
        return parse_topology(text)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}", exc.errors) from None


_PIPELINE_WRAP = re.compile(r" failed after \d+ attempt\(s\): ")
"""How `core.runtime.pipeline` wraps a failing step's error: `PipelineStepError: pipeline 'p':
step 0 ('s') failed after 1 attempt(s): ValueError: ...` (nested pipelines nest the text)."""

_MAX_CAUSES = 5


def root_cause(error: str) -> str:
    """The root cause in an example run's error text, as `Type: message`: what follows the
    last pipeline wrapper (`_PIPELINE_WRAP`), else the whole text.

    e.g. `PipelineStepError: pipeline 'pipeline': step 0 ('sloppy') failed after 1
    attempt(s): ValueError: no answer for q3` -> `ValueError: no answer for q3`.
    """
    return _PIPELINE_WRAP.split(error)[-1].strip()


def _cause_lines(results: Sequence[ExampleResult]) -> list[tuple[str, str]]:
    """`("error", "<n> of <m> example runs: <root cause>")` per distinct root cause of the
    runs that raised, most frequent first (at most 5, then how many more)."""
    causes: dict[str, int] = {}
    for r in results:
        if r.status == "error" and r.error:
            cause = root_cause(r.error)
            causes[cause] = causes.get(cause, 0) + 1
    ranked = sorted(causes.items(), key=lambda kv: -kv[1])  # stable: first seen first
    lines = [("error", f"{n} of {len(results)} example runs: {c}") for c, n in ranked]
    if len(lines) > _MAX_CAUSES:
        rest = sum(n for _, n in ranked[_MAX_CAUSES:])
        lines = [*lines[:_MAX_CAUSES], ("error", f"{rest} more example runs, other causes")]
    return lines


def _example_rows(results: Sequence[ExampleResult]) -> list[list[str]]:
    rows: list[list[str]] = []
    for r in results:
        error = root_cause(r.error) if r.status == "error" and r.error else r.error
        summary = (r.output_summary or error or "").replace("\n", " ")
        if len(summary) > 60:
            summary = summary[:57] + "..."
        rows.append(
            [
                r.example_id,
                str(r.trial),
                fmt_float(r.accuracy, 4),
                fmt_float(r.cost_usd, 6),
                fmt_float(r.latency_ms, 1),
                r.status,
                summary or "-",
            ]
        )
    return rows


def _evaluate_split(
    evaluator: TopologyEvaluator,
    spec: TopologySpec,
    examples: Sequence[GoldExample],
    split: str,
    out: Output,
) -> CandidateEvaluation:
    from rich.progress import Progress

    if out.progress_enabled:
        from rich.console import Console

        with Progress(console=Console(file=out.stderr), transient=True) as bar:
            task = bar.add_task(f"evaluate ({split})", total=len(examples))

            def advance(_: ExampleResult) -> None:
                bar.advance(task)

            return asyncio.run(evaluator.evaluate(spec, examples, split=split, on_example=advance))
    return asyncio.run(evaluator.evaluate(spec, examples, split=split))


def _status_text(ev: CandidateEvaluation) -> str:
    """`degenerate (100% blank or failed runs ...)`: the status, then its reason once."""
    if not ev.reason:
        return ev.status
    return f"{ev.status} ({ev.reason.removeprefix(f'{ev.status}: ')})"


def cmd_evaluate(args: argparse.Namespace, out: Output) -> int:
    """`evaluate PROBLEM SPEC.json [--split ...] [--limit N]`: one topology, per example."""
    problem = load_problem(args.problem, overrides=problem_overrides(args))
    spec = _read_spec(args.spec)
    executor = make_executor(args, problem)
    limits = effective_rate_limits(problem, args) if executor is None else {}
    # the problem's blank test, prices and latency source
    evaluator = problem.evaluator(
        executor=executor, rate_budget=RateBudget(limits) if limits else None
    )
    _register_learned_beside(args.spec, spec, evaluator)
    try:
        return _evaluate_splits(args, problem, spec, evaluator, out)
    finally:
        if executor is not None:
            executor.close()


def _register_learned_beside(
    path_text: str, spec: TopologySpec, evaluator: TopologyEvaluator
) -> None:
    """Register the learned conditions `spec` routes on from the `learned/` folder beside the
    spec file (where `apply` writes them: `<registry>/<name>/learned/` beside `current.json`
    and the `v*.json` versions), each digest checked (`core.search.learned.load_applied`). A
    spec from stdin, or one that names none, reads nothing.

    Raises:
        CliUsageError: a learned condition with no artefact there, or a damaged one.
    """
    if path_text == "-" or not learned_names(spec):
        return
    folder = Path(path_text).parent
    try:
        load_applied(folder, spec, evaluator.callable_registry)
    except (SpecError, ValueError) as exc:
        raise CliUsageError(
            f"{path_text}: the learned conditions it routes on, from {folder / LEARNED_FOLDER}: "
            f"{exc}"
        ) from exc


def _evaluate_splits(
    args: argparse.Namespace,
    problem: Problem,
    spec: Any,
    evaluator: TopologyEvaluator,
    out: Output,
) -> int:
    """`cmd_evaluate`'s per-split evaluations and tables."""
    splits = ["validation", "test"] if args.split == "all" else [args.split]
    worst = ExitCode.OK
    for split in splits:
        examples = list(problem.splits.get(split, []))
        if args.limit is not None:
            examples = examples[: args.limit]
        if not examples:
            raise CliUsageError(f"problem {problem.name} has no {split} examples to evaluate")
        ev = _evaluate_split(evaluator, spec, examples, split, out)
        if ev.rejected:
            raise CliUsageError(f"the spec cannot run on {problem.name}: {ev.reason}")
        if split == splits[0]:
            out.line(structure_line(spec))
        out.heading(f"{split}: {len(examples)} examples")
        out.table(
            ("example", "trial", "accuracy", "cost_usd", "latency_ms", "status", "output"),
            _example_rows(ev.results),
            right=("trial", "accuracy", "cost_usd", "latency_ms"),
        )
        out.kv(
            [
                ("status", _status_text(ev)),
                ("accuracy", fmt_float(ev.accuracy, 4)),
                ("cost_usd_per_example", fmt_float(ev.cost_usd, 6)),
                ("latency_ms_per_example", fmt_float(ev.latency_ms, 1)),
                ("aggregate_score", fmt_float(ev.aggregate_score, 4)),
                ("error_rate", fmt_float(ev.error_rate, 4)),
                ("blank_rate", fmt_float(ev.blank_rate, 4)),
                ("n_agents", ev.n_agents),
                ("depth", ev.depth),
                *_cause_lines(ev.results),
            ]
        )
        if not ev.valid:
            worst = ExitCode.FAILED
    return worst
