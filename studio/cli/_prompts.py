"""`search PROBLEM --then-prompts`: phase 2 of the two-phase workflow, GEPA on the winner.

After the topology search (phase 1) ends, `OptimizationRunner` evolves the system prompts of the
winning topology's agents (`core.optimization.genome_for`: one `PromptGene` per agent, seeded
with the prompt it runs now) on the problem's validation split, with a budget of
`--prompt-budget` metric calls (one metric call = one candidate run on one example).

Recording: phase 2 is stored as its own run in the run store, with its own journal and run id,
linked to the search: its `run_started` has `strategy="gepa"` and `config.phase = "prompts"`,
`config.parent_run_id = <the search's run id>` and `config.winner_spec` (the topology the prompts
evolve on). The user sees one run with two phases (`studio.views.phases`): `runs` lists phase 2
under its search, `show RUN` prints both, `apply RUN N --phase 2` applies a prompt candidate, and
the studio's Live page of the search draws phase 2's chart below its own. Each GEPA candidate is
a candidate of that record (`candidate_proposed` with the winner's spec and, as its `thought`,
the candidate's prompt texts; `candidate_evaluated` on the validation split; an
`archive_snapshot` at the metric calls GEPA found it at), journaled as GEPA accepts it
(`OptimizationRunner.optimize(on_candidate=...)`), so the studio, which reads the journals,
shows each while phase 2 runs; the last snapshot and `run_finished` come when it ends.

Resume: while phase 2 runs, every metric call, reflection and re-scoring is appended as it is
made to `<db>.prompts/<search run id>.calls` (a `core.optimization.PromptCallLog`), beside
`<search run id>.json` (phase 2's settings: reflection model, budget, seed, its run id, and its
status: `"running"` until it ends, then `"completed"`). An interrupted phase 2 continues with
`topology-studio search PROBLEM --resume <search run id>` (or the studio's Resume button,
`StudioManager.resume_search`): the search (complete) is replayed from its journal, then phase 2
runs again with its recorded settings (no phase 2 flag needed), answering every recorded call
from the log, so no metric call is made twice and it ends as the uninterrupted run would; its
journal is continued (a candidate already journaled is not written again).

Reflection model: GEPA's reflection proposes new prompt texts, which no replayed model can do
(a replay problem's models only replay recorded answers), so `--then-prompts` needs
`--reflection-model provider:model`; `test` (pydantic-ai's `TestModel`) runs offline, proposing
a fixed text. The model is built before phase 1 starts, so a model that cannot be built (no API
key) is refused before anything runs.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studio.cli._common import CliUsageError

if TYPE_CHECKING:  # the parser is built without these (they load pydantic-ai and gepa)
    from pydantic_ai.models import Model

    from core.ir import TopologySpec
    from core.optimization.runner import PromptCandidate
    from core.problems import Problem
    from core.search.result import CandidateRecord, OptimizationResult
    from core.storage import RunJournal
    from core.vocab.events import SearchEvent
    from studio.cli._output import Output

__all__ = [
    "DEFAULT_PROMPT_BUDGET_PASSES",
    "PromptPhase",
    "add_prompt_arguments",
    "prompt_phase_from_args",
    "prompt_state_paths",
    "recorded_prompt_phase",
    "run_prompt_phase",
    "run_prompt_phase_on",
]

DEFAULT_PROMPT_BUDGET_PASSES = 3
"""`--prompt-budget` when not given: this many passes over the validation split, in metric calls
(900 on gsm8k_replay's 300 examples). GEPA first scores the starting prompts on every validation
example, so a budget of one pass or less proposes nothing: the first pass, then room for
minibatch proposals and the full validation of the ones that improve."""


def add_prompt_arguments(parser: argparse.ArgumentParser) -> None:
    """`--then-prompts`, `--reflection-model`, `--prompt-budget` on the `search` parser."""
    parser.add_argument(
        "--then-prompts",
        action="store_true",
        help="phase 2: after the search, evolve the winning topology's prompts with GEPA "
        "(recorded as its own run, linked to the search)",
    )
    parser.add_argument(
        "--reflection-model",
        metavar="PROVIDER:MODEL",
        help="--then-prompts: the model that proposes new prompts (e.g. openai:gpt-4.1-mini; "
        "'test' is pydantic-ai's offline TestModel)",
    )
    parser.add_argument(
        "--prompt-budget",
        type=int,
        metavar="N",
        help="--then-prompts: GEPA's budget in metric calls, one = one run on one example "
        f"(default {DEFAULT_PROMPT_BUDGET_PASSES} passes over the validation split)",
    )


class PromptPhase:
    """Phase 2's settings, checked before phase 1 runs."""

    def __init__(
        self, reflection_model: str, model: Model, budget: int | None, seed: int | None = None
    ) -> None:
        self.reflection_model = reflection_model
        """As given (`provider:model`)."""
        self.model = model
        """Built (never called yet)."""
        self.budget = budget
        """Metric calls; None: `DEFAULT_PROMPT_BUDGET_PASSES` passes over the validation split."""
        self.seed = seed
        """GEPA's seed; None: the problem's search seed (a resumed phase 2 keeps its own)."""
        self.resuming = False
        """True when these settings were read back from an interrupted phase 2."""
        self.run_id: str | None = None
        """The interrupted phase 2's run id (its journal is continued), when recorded."""

    def budget_for(self, n_validation: int) -> int:
        """The budget in metric calls for a validation split of `n_validation` examples."""
        if self.budget is not None:
            return self.budget
        return DEFAULT_PROMPT_BUDGET_PASSES * max(1, n_validation)


def prompt_phase_from_args(args: argparse.Namespace) -> PromptPhase | None:
    """Phase 2's settings from the command line; None without `--then-prompts`.

    Raises:
        CliUsageError: `--reflection-model` or `--prompt-budget` without `--then-prompts`;
            `--then-prompts` without `--reflection-model` (no offline reflection exists: the
            line says what to give); a budget below 1; a model that cannot be built (named).
    """
    from core.errors import OptimizationError
    from core.optimization.runner import build_reflection_model

    model_text: str | None = getattr(args, "reflection_model", None)
    budget: int | None = getattr(args, "prompt_budget", None)
    if not getattr(args, "then_prompts", False):
        given = [
            f for f, v in (("--reflection-model", model_text), ("--prompt-budget", budget)) if v
        ]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise CliUsageError(f"{' and '.join(given)} {verb} --then-prompts (phase 2)")
        return None
    if not model_text:
        raise CliUsageError(
            "--then-prompts needs --reflection-model PROVIDER:MODEL: GEPA's reflection model "
            "writes the new prompts, and no offline model can (a replay problem's models only "
            "replay recorded answers); give e.g. --reflection-model openai:gpt-4.1-mini (its "
            "API key in the environment), or --reflection-model test (pydantic-ai's TestModel, "
            "offline, proposes a fixed text)"
        )
    if budget is not None and budget < 1:
        raise CliUsageError(f"--prompt-budget must be at least 1 metric call, got {budget}")
    try:
        model = build_reflection_model(model_text)
    except OptimizationError as exc:
        raise CliUsageError(f"--reflection-model: {exc}") from exc
    return PromptPhase(model_text, model, budget)


def prompt_state_paths(db: Path, parent_run_id: str) -> tuple[Path, Path]:
    """`(settings, call log)` of the phase 2 that follows search run `parent_run_id`:
    `<db>.prompts/<run id>.json` and `<db>.prompts/<run id>.calls` (not in the journals folder,
    whose `*.jsonl` files are all run journals)."""
    from core.storage.journal import check_run_id

    folder = Path(f"{db}.prompts")
    run_id = check_run_id(parent_run_id)
    return folder / f"{run_id}.json", folder / f"{run_id}.calls"


def recorded_prompt_phase(
    db: Path, parent_run_id: str, given: PromptPhase | None
) -> PromptPhase | None:
    """The settings of an interrupted phase 2 after search run `parent_run_id` (its status is
    still `"running"`), to resume it; `given` (the command line's) when there is none.

    Raises:
        CliUsageError: the settings file is not readable JSON (named); phase 2 flags that differ
            from the recorded ones (both named: a resumed phase 2 keeps its own, so it ends as
            the uninterrupted run would); a recorded reflection model that cannot be built now.
    """
    import json

    from core.errors import OptimizationError
    from core.optimization.runner import build_reflection_model

    settings, _ = prompt_state_paths(db, parent_run_id)
    if not settings.is_file():
        return given
    try:
        recorded = json.loads(settings.read_text())
        model_text = str(recorded["reflection_model"])
        budget, seed, status = int(recorded["budget"]), int(recorded["seed"]), recorded["status"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliUsageError(f"phase 2 settings {settings} are damaged ({exc})") from exc
    if status != "running":
        return given
    if given is not None:
        changed = [
            f"{flag} {now} (recorded: {then})"
            for flag, now, then in (
                ("--reflection-model", given.reflection_model, model_text),
                ("--prompt-budget", given.budget, budget),
            )
            if now is not None and now != then
        ]
        if changed:
            raise CliUsageError(
                f"cannot resume phase 2 of run {parent_run_id} with other options than it was "
                f"started with: {', '.join(changed)}; resume it without them"
            )
    try:
        model = build_reflection_model(model_text)
    except OptimizationError as exc:
        raise CliUsageError(f"resuming phase 2 of run {parent_run_id}: {exc}") from exc
    phase = PromptPhase(model_text, model, budget, seed)
    phase.resuming = True
    run_id = recorded.get("run_id")
    phase.run_id = run_id if isinstance(run_id, str) and run_id else None
    return phase


def _write_settings(path: Path, settings: dict[str, Any]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(settings, indent=2) + "\n")
    tmp.replace(path)


def _winner(problem: Problem, result: OptimizationResult) -> TopologySpec:
    from core.errors import OptimizationError
    from core.ir import parse_topology

    value = result.best_decoded.get(problem.name)
    if value is None and len(result.best_decoded) == 1:
        value = next(iter(result.best_decoded.values()))
    if isinstance(value, str):
        return parse_topology(value)
    if value is None or isinstance(value, int | float):
        raise OptimizationError(f"the search's result holds no topology for {problem.name!r}")
    return value


def _num(value: float | None) -> float:
    return math.nan if value is None else value


def _prompt_lines(candidate: dict[str, str]) -> str:
    return "\n".join(f"{name}: {text}" for name, text in candidate.items())


class _LiveJournal:
    """Phase 2's run journal, written as phase 2 goes (see the module docstring).

    `candidate(c)` appends, for a candidate GEPA accepted, its `candidate_proposed` (the
    winner's spec; its prompt texts as the `thought`), its `candidate_evaluated` (validation
    split) and an `archive_snapshot` at the metric calls GEPA found it at (`n_evaluations`,
    the Live page's x), the best so far by recorded score (NaN never best). On resume the
    journal holds an interrupted phase 2's events, and the replayed run reports its candidates
    again: an event already recorded is not written twice. Called from GEPA's worker thread
    (`RunJournal` is thread-safe; no other thread writes this journal meanwhile).
    """

    def __init__(self, journal: RunJournal, run_id: str, n_val: int) -> None:
        from core.vocab.events import ArchiveSnapshot, CandidateEvaluated, CandidateProposed

        self._journal = journal
        self._run_id = run_id
        self._n_val = n_val
        recorded = journal.recorded
        self._proposed = {e.candidate_idx for e in recorded if isinstance(e, CandidateProposed)}
        self._evaluated = {e.candidate_idx for e in recorded if isinstance(e, CandidateEvaluated)}
        self._listed = {i for e in recorded if isinstance(e, ArchiveSnapshot) for i in e.entries}
        self._seen: list[CandidateRecord] = []
        self._leader: CandidateRecord | None = None

    def append(self, event: SearchEvent) -> None:
        self._journal.append(event)

    @property
    def next_seq(self) -> int:
        return self._journal.next_seq

    def candidate(self, c: PromptCandidate) -> None:
        from core.vocab.events import ArchiveSnapshot, CandidateEvaluated, CandidateProposed

        record, idx, now = c.record, c.record.candidate_idx, time.time()
        self._seen.append(record)
        score = _num(record.score)
        if self._leader is None or (math.isfinite(score) and not _num(self._leader.score) >= score):
            self._leader = record
        if idx not in self._proposed:
            self.append(
                CandidateProposed(
                    run_id=self._run_id,
                    seq=self.next_seq,
                    ts=now,
                    candidate_idx=idx,
                    generation=record.generation,
                    spec_hash=record.spec_hash,
                    spec_json=record.spec_json,
                    parent_idx=record.parent_idx,
                    operator=record.operator,
                    thought=_prompt_lines(c.prompts),
                )
            )
        if idx not in self._evaluated:
            self.append(
                CandidateEvaluated(
                    run_id=self._run_id,
                    seq=self.next_seq,
                    ts=now,
                    candidate_idx=idx,
                    spec_hash=record.spec_hash,
                    split="validation",
                    n_examples=self._n_val,
                    accuracy=_num(record.accuracy),
                    cost_usd=_num(record.cost_usd),
                    latency_ms=_num(record.latency_ms),
                    n_agents=record.n_agents or 0,
                    depth=record.depth or 0,
                    aggregate_score=score,
                    valid=record.valid,
                )
            )
        if idx not in self._listed:
            lead = self._leader
            self.append(
                ArchiveSnapshot(
                    run_id=self._run_id,
                    seq=self.next_seq,
                    ts=now,
                    generation=record.generation,
                    entries=[r.candidate_idx for r in self._seen],
                    front=[lead.candidate_idx],
                    best_idx=lead.candidate_idx,
                    best_score=_num(lead.score),
                    n_evaluations=c.metric_calls,
                    cost_usd_total=math.nan,  # not known per candidate: the last snapshot has it
                )
            )

    def finish(self, result: OptimizationResult, budget: int, started_at: float) -> None:
        """The run's last snapshot (every candidate, the metric calls made in all, the cost)
        and its `run_finished`."""
        from core.vocab.events import ArchiveSnapshot, RunFinished

        raw = result.raw
        used: dict[str, Any] = raw["budget_used"]
        best: int = raw["best_idx"]
        reflection_usd = used["reflection_cost_usd"]
        usd = used["cost_usd"] + (reflection_usd if math.isfinite(reflection_usd) else 0.0)
        now = time.time()
        self.append(
            ArchiveSnapshot(
                run_id=self._run_id,
                seq=self.next_seq,
                ts=now,
                generation=max(r.generation for r in result.history),
                entries=[r.candidate_idx for r in result.history],
                front=[best],
                best_idx=best,
                best_score=result.best_score,
                n_evaluations=used["metric_calls"],
                cost_usd_total=usd,
            )
        )
        self.append(
            RunFinished(
                run_id=self._run_id,
                seq=self.next_seq,
                ts=now,
                status="completed",
                reason=f"prompt budget of {budget} metric calls reached",
                best_idx=best,
                budget_used={
                    "evaluations": float(len(result.history)),
                    "metric_calls": float(used["metric_calls"]),
                    "usd": usd,
                    "wall_s": now - started_at,
                    "model_requests": float(used["model_requests"]),
                    "reflection_requests": float(used["reflection_requests"]),
                    "reflection_input_tokens": float(used["reflection_input_tokens"]),
                    "reflection_output_tokens": float(used["reflection_output_tokens"]),
                    "reflection_usd": reflection_usd if math.isfinite(reflection_usd) else 0.0,
                },
            )
        )


def run_prompt_phase(
    problem: Problem,
    result: OptimizationResult,
    parent_run_id: str,
    phase: PromptPhase,
    db: Path,
    out: Output,
    *,
    seed: int | None = None,
) -> str:
    """Phase 2 on the winner of `result` (`run_prompt_phase_on`)."""
    return run_prompt_phase_on(
        problem, _winner(problem, result), parent_run_id, phase, db, out, seed=seed
    )


def run_prompt_phase_on(
    problem: Problem,
    winner: TopologySpec,
    parent_run_id: str,
    phase: PromptPhase,
    db: Path,
    out: Output,
    *,
    seed: int | None = None,
    ingest: bool = True,
) -> str:
    """Phase 2 on `winner` (phase 1's best topology): GEPA, its run journaled as it goes, then
    ingested (unless `ingest=False`: the studio, which holds the database, ingests journals
    itself) and printed.

    Prints the start and end accuracy (validation split), the best aggregate score (phase 1's
    score: accuracy with the problem's cost and latency weights) beside the accuracy GEPA ranked
    by, the metric calls against the budget (and, resumed, how many were answered from the call
    log), the model requests (task and reflection) and the best prompt of each agent.

    Every call is recorded in the call log of `prompt_state_paths(db, parent_run_id)` as it is
    made; `phase.resuming` (from `recorded_prompt_phase`) replays the recorded ones first.

    Returns:
        Phase 2's run id.

    Raises:
        OptimizationError: the winner runs no agent, or an agent without a prompt (named).
    """
    import asyncio

    from core.errors import OptimizationError
    from core.optimization import OptimizationConfig, OptimizationRunner
    from core.optimization.replay import PromptCallLog
    from core.optimization.seeds import genome_for
    from core.problems._prices import cost_basis
    from core.storage import RunJournal, journal_path, new_run_id
    from core.vocab.events import RunStarted
    from studio.cli._output import fmt_float
    from studio.cli.runs import designer_calls_text

    evaluator = problem.evaluator()
    genome = genome_for(winner, problem.agent_registry)
    val = list(problem.splits.get("validation", []))
    if not val:
        raise OptimizationError(f"problem {problem.name} has no validation examples for phase 2")
    budget = phase.budget_for(len(val))
    if phase.seed is not None:
        seed = phase.seed
    config = OptimizationConfig(
        max_metric_calls=budget, seed=problem.search.seed if seed is None else seed
    )
    runner = OptimizationRunner(
        config, genome=genome, evaluator=evaluator, spec=winner, reflection_model=phase.model
    )
    out.heading("Phase 2: prompts (GEPA)")
    out.line(
        f"evolving {', '.join(genome.names)} of the winning topology on {len(val)} validation "
        f"examples, budget {budget} metric calls, reflection model {phase.reflection_model}"
    )
    if budget <= len(val):
        out.note(
            f"note: a budget of {budget} metric calls is at most one pass over the {len(val)} "
            "validation examples, which GEPA spends scoring the starting prompts: no new prompt "
            f"will be tried (give --prompt-budget above {len(val)})"
        )
    if cost_basis(problem.prices) == "replayed":
        out.note(
            f"note: {problem.name}'s agents replay recorded answers, which no prompt changes: "
            "phase 2 can only match the starting accuracy here (it shows the workflow; run it on "
            "a problem with live models to improve prompts)"
        )
    settings_path, log_path = prompt_state_paths(db, parent_run_id)
    # phase 2's run id is chosen once and kept in its settings, so a resumed phase 2 continues
    # its own journal (an interrupted one recorded before that was kept: a new id)
    run_id = phase.run_id if phase.resuming and phase.run_id else new_run_id()
    settings: dict[str, Any] = {
        "reflection_model": phase.reflection_model,
        "budget": budget,
        "seed": config.seed,
        "status": "running",
        "run_id": run_id,
    }
    if not phase.resuming:
        log_path.unlink(missing_ok=True)  # a finished phase 2 run again starts afresh
    _write_settings(settings_path, settings)
    started_at = time.time()
    with RunJournal.open(journal_path(db, run_id)) as journal:
        live = _LiveJournal(journal, run_id, len(val))
        live.append(
            RunStarted(
                run_id=run_id,
                seq=journal.next_seq,
                ts=started_at,
                problem=problem.name,
                strategy="gepa",
                seed=config.seed,
                config={
                    "phase": "prompts",
                    "parent_run_id": parent_run_id,
                    "genes": list(genome.names),
                    "reflection_model": phase.reflection_model,
                    "optimization": config.model_dump(),
                    "budget": {"max_metric_calls": config.max_metric_calls},
                    "n_validation": len(val),
                    # the topology the prompts evolve on: what the studio's Resume needs
                    "winner_spec": winner.model_dump_json(),
                },
                problem_config=problem.to_dict(),
                resumed=bool(journal.recorded),
            )
        )
        with PromptCallLog(log_path) as call_log:
            if call_log.recorded:
                out.note(
                    f"resuming phase 2 of run {parent_run_id}: {call_log.recorded} recorded "
                    f"calls are answered from {log_path}"
                )
            prompts = asyncio.run(
                runner.optimize(trainset=val, call_log=call_log, on_candidate=live.candidate)
            )
        live.finish(prompts, budget, started_at)
    _write_settings(settings_path, {**settings, "status": "completed"})
    if ingest:
        _ingest(db, out)
    used = prompts.raw["budget_used"]
    rows: list[tuple[str, Any]] = [
        ("run", run_id),
        ("parent run", parent_run_id),
        ("start accuracy", fmt_float(prompts.raw["start_accuracy"], 4)),
        ("end accuracy", fmt_float(prompts.raw["end_accuracy"], 4)),
        ("best aggregate score", fmt_float(prompts.best_score, 4)),
        ("gepa best accuracy", fmt_float(prompts.raw["gepa_best_accuracy"], 4)),
        ("metric calls", f"{used['metric_calls']} of {budget}"),
        (
            "model requests",
            f"{used['model_requests']} task + {used['reflection_requests']} reflection",
        ),
        (
            "reflection_usd",
            f"{fmt_float(used['reflection_cost_usd'], 6)} (the reflection model's own calls; "
            f"the candidates' task calls: {fmt_float(used['cost_usd'], 6)})",
        ),
        ("reflection_calls", designer_calls_text(used, "reflection")),
        ("candidates", str(len(prompts.history))),
    ]
    for name, text in prompts.best_candidate.items():
        shown = " ".join(str(text).split())
        rows.append((name, shown if len(shown) <= 100 else shown[:97] + "..."))
    if used["replayed_metric_calls"]:
        rows.append(("replayed", f"{used['replayed_metric_calls']} metric calls from the log"))
    rows.append(("show", f"topology-studio show {parent_run_id} --db {db}"))  # both phases
    out.kv(rows)
    return run_id


def _ingest(db: Path, out: Output) -> None:
    from core.errors import StoreBusyError
    from core.storage import open_store

    try:
        store = open_store(db)
    except StoreBusyError:
        out.note(f"note: {db} is held by another process: it ingests phase 2's journal")
        return
    try:
        store.ingest()
    finally:
        store.close()
