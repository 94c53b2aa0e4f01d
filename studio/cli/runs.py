"""`runs`, `show RUN`, `diff RUN CANDIDATE`, `apply RUN CANDIDATE [--to PATH] [--yes]`."""

from __future__ import annotations

import argparse
import getpass
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from core.errors import SpecError, StoreError
from core.ir import TopologySpec, parse_topology, spec_hash
from core.ir.diff import structural_diff, unified_json_diff
from core.ir.limits import MAX_DEPTH_CEILING, SpecLimits
from core.search.apply import apply_specs
from core.search.learned import artefacts_from_journals, learned_names
from core.search.registry import Approval, TopologyRegistry
from core.storage import IngestError, RunStore
from core.storage.journal import journal_path
from core.storage.queries import is_missing
from core.vocab.pareto import DEFAULT_OBJECTIVES
from studio.cli._common import CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output, fmt_calls, fmt_float
from studio.cli._report import (
    ACCURACY_COST,
    Table,
    front_legend,
    more_on_the_full_front,
    print_changes,
    print_front,
    print_front_noise,
    print_spec,
    print_test_front,
    table_records,
)
from studio.cli.store import open_cli_store
from studio.registry_root import default_registry_root
from studio.views.prompt_apply import (
    PROMPT_STRATEGY,
    Part,
    PromptApplyPlan,
    candidate_prompts,
    evolved_prompts,
    part_label,
    plan_apply,
    prompt_run,
)

__all__ = [
    "COST_TOTAL_NOTE",
    "MODELLED_COST_DETAIL",
    "MODELLED_COST_NOTE",
    "DESIGNER_CALLS_NOTE",
    "PROMPT_COST_NOTE",
    "candidate_spec",
    "cmd_apply",
    "cmd_diff",
    "cmd_runs",
    "cmd_show",
    "designer_calls_text",
    "errors_line",
    "print_run",
    "resolve_run_id",
]

_READ_LIMITS = SpecLimits(max_depth=MAX_DEPTH_CEILING, max_nodes=100_000)


def _ts(value: Any) -> str:
    if is_missing(value):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(value)))


def resolve_run_id(store: RunStore, run: str) -> str:
    """The run id `run` names: an exact id, or a prefix that only one run has.

    Raises:
        CliUsageError: no run, or several runs, match.
    """
    if store.get_run(run) is not None:
        return run
    runs = store.list_runs()
    ids = [str(r) for r in runs["run_id"]] if not runs.empty else []
    matches = [r for r in ids if r.startswith(run)]
    if len(matches) > 1:  # a search and its phase 2: the run is the search
        from studio.views.phases import phase_two_of  # (pandas: not at import, see `show`)

        second = set(phase_two_of(runs).values())
        searches = [r for r in matches if r not in second]
        if len(searches) == 1:
            matches = searches
    if len(matches) == 1:
        return matches[0]
    if not matches:
        recent = ", ".join(ids[:3]) or "none recorded"
        raise CliUsageError(
            f"no run {run!r} in the database (recent runs: {recent}; see 'topology-studio runs')"
        )
    raise CliUsageError(f"{run!r} matches {len(matches)} runs: {', '.join(matches[:5])}")


def candidate_spec(store: RunStore, run_id: str, candidate: int) -> TopologySpec:
    """The spec of candidate `candidate` of run `run_id`.

    Raises:
        CliUsageError: the run has no such candidate, or it was not a valid spec.
    """
    archive = store.archive_records(run_id, include_unevaluated=True)
    rows = [r for r in archive if r["candidate_idx"] == candidate]
    if not rows:
        n = len(archive)
        raise CliUsageError(
            f"run {run_id} has no candidate {candidate} (it has {n} candidate(s): 0..{n - 1})"
        )
    spec_hash = str(rows[0]["spec_hash"] or "")
    text = store.get_spec(spec_hash) if spec_hash else None
    if not text:
        reason = rows[0].get("reason")
        raise CliUsageError(
            f"candidate {candidate} of run {run_id} is not a valid spec"
            + (f" ({reason})" if isinstance(reason, str) and reason else "")
        )
    try:
        return parse_topology(text, _READ_LIMITS)
    except SpecError as exc:
        raise CliUsageError(f"candidate {candidate} of run {run_id}: {exc}") from exc


def _skipped_text(skipped: Sequence[IngestError]) -> str:
    """How many journal lines were skipped and where the first is, e.g.
    `2 (not stored; first: line 3 of data/runs.duckdb.journals/r1.jsonl)`."""
    first = skipped[0]
    where = f"line {first.line_no}" if first.line_no is not None else f"byte {first.byte_offset}"
    return f"{len(skipped)} (not stored; first: {where} of {first.journal})"


COST_TOTAL_NOTE = "every model call of the run: search, re-scoring and held-out test"
"""What the summary's `cost_usd_total` counts (the progress bar's cost is the search's alone,
so the total is larger once the front is re-scored and tested)."""

PROMPT_COST_NOTE = "phase 2: its metric calls' model cost plus the reflection model's cost"
"""What a phase-2 (prompt) run's `cost_usd_total` counts (`runs` lists the same figure)."""

_MAX_LISTED = 5


def errors_line(archive: Table) -> str:
    """The summary's `errors` value: which candidates had example runs that raised, and how
    often (`error_rate`, the share of the candidate's example runs), highest first.

    e.g. `none`, or `2 of 10 candidates: 3 (30.0% of its example runs), 7 (10.0%)`; past 5
    candidates, `and N more`. `archive` is `RunStore.archive(run_id)` (one row a candidate).
    """
    records = table_records(archive)
    rates: list[tuple[float, int]] = []
    for rec in records:
        rate = rec.get("error_rate")
        if rate is not None and float(rate) > 0:
            rates.append((float(rate), int(rec["candidate_idx"])))
    if not rates:
        return "none"
    rates.sort(key=lambda r: (-r[0], r[1]))
    listed = [f"{idx} ({100 * rate:.1f}%)" for rate, idx in rates[:_MAX_LISTED]]
    listed[0] = listed[0].replace("%)", "% of its example runs)")
    more = f", and {len(rates) - _MAX_LISTED} more" if len(rates) > _MAX_LISTED else ""
    return f"{len(rates)} of {len(records)} candidates: {', '.join(listed)}{more}"


MODELLED_COST_NOTE = "USD modelled, no money spent"
"""Right after `cost_usd_total`'s figure when every agent of the run's problem replays recorded
calls: a newcomer's first screen otherwise reads as thousands of dollars spent."""

MODELLED_COST_DETAIL = "replayed recorded calls priced at the problem's [models.prices]"
"""What a modelled `cost_usd_total` is (`search` and `demo` on gsm8k_replay: its USD figures are
what the calls would have cost)."""


DESIGNER_CALLS_NOTE = "{who}'s own, not in the candidates' figures"
"""After the designer's (or phase 2's reflection model's) requests and tokens in `show`."""

_WHO = {"design": "the designer", "reflection": "the reflection model"}


def designer_calls_text(used: dict[str, Any], prefix: Literal["design", "reflection"]) -> str:
    """`budget_used`'s `<prefix>_requests`, `_input_tokens` and `_output_tokens` as one value,
    e.g. `3 requests, 2700 input + 240 output tokens (the designer's own, not in the
    candidates' figures)`; `prefix` `"reflection"`: phase 2's reflection model."""
    figures = (used.get(f"{prefix}_{k}") for k in ("requests", "input_tokens", "output_tokens"))
    return f"{fmt_calls(*figures)} ({DESIGNER_CALLS_NOTE.format(who=_WHO[prefix])})"


def print_run(
    store: RunStore,
    run_id: str,
    out: Output,
    *,
    modelled_cost: bool = False,
    all_objectives: bool = False,
) -> dict[str, Any]:
    """Print a run's summary, its validation Pareto front, and its best topology with the
    held-out test score; return the figures printed (for `search`'s own summary).

    The front (and the test front of its members) is over accuracy and cost
    (`ACCURACY_COST`), with a line saying how many more candidates the front over all five
    objectives holds; `all_objectives` (`--objectives all`) prints that full front instead.

    The summary counts `candidates` (topologies evaluated, the budget's unit), the run's
    `cost_usd_total` (`COST_TOTAL_NOTE`, and `MODELLED_COST_NOTE` when `modelled_cost`) and the
    candidates whose example runs raised (`errors_line`).

    The summary says how many lines of the run's journal were skipped (not valid events, so
    not stored; `RunStore.list_ingest_errors`) when there are any."""
    run = store.get_run(run_id)
    if run is None:
        raise CliUsageError(f"no run {run_id!r} in the database")
    # the front and the winner on the full validation split only: compare like with like
    # rows as dicts, not DataFrames: the report runs at the end of a search, and pandas with
    # pyarrow would add about 70 MiB to the process's peak
    archive = store.archive_records(run_id, split="validation")
    out.heading(f"Run {run_id}")
    used = run.budget_used
    pairs: list[tuple[str, Any]] = [
        ("problem", run.problem or "-"),
        ("strategy", run.strategy or "-"),
        ("seed", run.seed if run.seed is not None else "-"),
        ("status", run.status + (f" ({run.reason})" if run.reason else "")),
        ("started", _ts(run.started_at)),
        ("candidates", int(used.get("evaluations", 0)) if used else "-"),
        (
            "cost_usd_total",
            f"{fmt_float(used.get('usd'), 6)} "
            + (f"{MODELLED_COST_NOTE} " if modelled_cost else "")
            + f"({PROMPT_COST_NOTE if run.strategy == PROMPT_STRATEGY else COST_TOTAL_NOTE}"
            + (f"; {MODELLED_COST_DETAIL})" if modelled_cost else ")")
            if used
            else "-",
        ),
        ("wall_s", fmt_float(used.get("wall_s"), 1) if used else "-"),
        ("errors", errors_line(store.archive_records(run_id))),
    ]
    if used and (used.get("design_usd") or 0.0) > 0:  # the designer's calls, apart
        pairs.insert(
            -2,
            (
                "designer_usd",
                f"{fmt_float(used.get('design_usd'), 6)} (the designer's own model calls; "
                f"the candidates' evaluations: {fmt_float(used.get('eval_usd'), 6)})",
            ),
        )
    if used and (used.get("design_requests") or 0.0) > 0:  # recorded since tokens are
        pairs.insert(-2, ("designer_calls", designer_calls_text(used, "design")))
    skipped = store.list_ingest_errors(run_id)
    if skipped:
        pairs.append(("skipped_lines", _skipped_text(skipped)))
    out.kv(pairs)
    weights = run.config.get("weights")
    n_validation = run.config.get("n_validation")
    objectives = DEFAULT_OBJECTIVES if all_objectives else ACCURACY_COST
    legend = front_legend(
        weights if isinstance(weights, dict) else None,
        n_validation if isinstance(n_validation, int) else None,
        objectives=objectives,
    )
    shown = (
        archive
        if all_objectives
        else store.archive_records(run_id, split="validation", objectives=objectives)
    )
    more = None if all_objectives else more_on_the_full_front(shown, archive)
    print_front(
        out,
        shown,
        title="Pareto front (validation)",
        legend=legend,
        more=more,
        objectives=objectives,
    )
    print_test_front(out, store.test_front_records(run_id, objectives=objectives))
    best = [r for r in archive if bool(r["is_best"])]
    figures: dict[str, Any] = {"best_idx": None, "test_accuracy": None}
    if not best:
        out.line("no valid best candidate")
        return figures
    row = best[0]
    idx = int(row["candidate_idx"])
    figures["best_idx"] = idx
    out.heading(f"Best topology (candidate {idx})")
    print_spec(out, candidate_spec(store, run_id, idx))
    test_acc: Any = row.get("test_accuracy")
    test_score: Any = row.get("test_aggregate_score")
    if not is_missing(test_acc):
        figures["test_accuracy"] = float(test_acc)
        out.line(
            f"held-out test: accuracy {fmt_float(test_acc, 4)}, score "
            f"{fmt_float(test_score, 4)} (candidate {idx})"
        )
    else:
        out.line("held-out test: not evaluated")
    return figures


def _design_tokens(row: dict[str, Any]) -> str:
    """`runs`' `design_tokens`: the designer's (or reflection model's) input + output tokens,
    e.g. `2700+240`; `-` when it made no request."""
    if is_missing(row.get("design_requests")) or not int(row["design_requests"]):
        return "-"
    return f"{int(row['design_input_tokens'])}+{int(row['design_output_tokens'])}"


def cmd_runs(args: argparse.Namespace, out: Output) -> int:
    """`runs`: every recorded run, newest first; `design_usd` and `design_tokens` are the
    designer's (meta agent) or reflection model's (phase 2) own calls, apart from the
    candidates'."""
    from studio.views.phases import fold_phases, phase_two_of  # (pandas: not at import)

    db = resolve_db_path(args.db)
    with open_cli_store(db, out) as store:
        runs = store.list_runs()
        if runs.empty:
            out.line(f"no runs recorded in {db}")
            return ExitCode.OK
        rows: list[list[str]] = []
        second = set(phase_two_of(runs).values())
        for r in fold_phases(runs).to_dict("records"):
            # phase 2 of a listed search is right under it, as its second phase (a phase 2
            # whose search is not in the store keeps its run id)
            phase2 = str(r["run_id"]) in second
            rows.append(
                [
                    "  phase 2 (prompts)" if phase2 else str(r["run_id"]),
                    str(r["problem"] or "-"),
                    str(r["strategy"] or "-"),
                    str(r["status"]),
                    _ts(r["started_at"]).replace(" ", "T"),
                    str(int(r["n_candidates"] or 0)),
                    str(int(r["n_evaluations"] or 0)),
                    fmt_float(r["cost_usd"], 6),
                    fmt_float(r["design_cost_usd"], 6),
                    _design_tokens(r),
                    "-" if is_missing(r["best_idx"]) else str(int(r["best_idx"])),
                    fmt_float(None if is_missing(r["best_score"]) else r["best_score"], 4),
                ]
            )
        out.table(
            (
                "run",
                "problem",
                "strategy",
                "status",
                "started",
                "candidates",
                "example_runs",
                "cost_usd",
                "design_usd",
                "design_tokens",
                "best",
                "best_score",
            ),
            rows,
            right=(
                "candidates",
                "example_runs",
                "cost_usd",
                "design_usd",
                "design_tokens",
                "best",
                "best_score",
            ),
        )
    return ExitCode.OK


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    """`show RUN`: summary, front, best topology and test score; for a search with a phase 2
    (`search --then-prompts`), then phase 2's (`print_phase_two`)."""
    with open_cli_store(resolve_db_path(args.db), out) as store:
        run_id = resolve_run_id(store, args.run)
        print_run(store, run_id, out, all_objectives=args.objectives == "all")
        _print_noise(store, run_id, out)
        second = store.phase_two_run(run_id)
        if second is not None:
            print_phase_two(store, run_id, second, out)
    return ExitCode.OK


def _print_noise(store: RunStore, run_id: str, out: Output) -> None:
    """`show`'s front-noise section, from records (no pandas, as the run report)."""
    from studio.views.front_noise import front_noise_records

    front = [r for r in store.archive_records(run_id, split="validation") if r.get("on_front")]
    if not front:
        return
    accuracy = {int(r["candidate_idx"]): float(r["accuracy"]) for r in front}
    print_front_noise(out, front_noise_records(store, run_id, front), accuracy)


def print_phase_two(store: RunStore, run_id: str, phase2_id: str, out: Output) -> None:
    """Phase 2 of run `run_id` (its record `phase2_id`): status, candidates, metric calls
    against the budget, start and best accuracy and score (validation), cost, the best
    candidate's prompts, and how to apply or resume it by the search's run id."""
    run = store.get_run(phase2_id)
    if run is None:
        return
    used = run.budget_used or {}
    budget = run.config.get("budget")
    limit = budget.get("max_metric_calls") if isinstance(budget, dict) else None
    archive = store.archive_records(phase2_id, include_unevaluated=True)
    by_idx = {int(r["candidate_idx"]): r for r in archive}
    out.heading(f"Run {run_id}, phase 2: prompts (GEPA)")
    pairs: list[tuple[str, Any]] = [
        ("status", run.status + (f" ({run.reason})" if run.reason else "")),
        ("candidates", str(len(archive))),
        (
            "metric calls",
            (f"{int(used['metric_calls'])}" if "metric_calls" in used else "-")
            + (f" of {limit}" if limit is not None else ""),
        ),
    ]
    start = by_idx.get(0)
    if start is not None:
        pairs.append(("start accuracy", fmt_float(_none_if_na(start.get("accuracy")), 4)))
    best = [r for r in archive if bool(r.get("is_best"))]
    if best:
        row = best[0]
        pairs.append(
            (
                "best",
                f"candidate {int(row['candidate_idx'])}: accuracy "
                f"{fmt_float(_none_if_na(row.get('accuracy')), 4)}, score "
                f"{fmt_float(_none_if_na(row.get('aggregate_score')), 4)}",
            )
        )
        phase2 = prompt_run(phase2_id, run.strategy, run.config)
        if phase2 is not None:
            try:
                texts = candidate_prompts(str(row.get("thought") or ""), phase2.genes)
            except ValueError:
                texts = {}
            for gene, text in texts.items():
                shown = " ".join(text.split())
                pairs.append((gene, shown if len(shown) <= 100 else shown[:97] + "..."))
    if used:
        pairs.append(("cost_usd_total", f"{fmt_float(used.get('usd'), 6)} ({PROMPT_COST_NOTE})"))
    if "reflection_input_tokens" in used:  # recorded since tokens are
        pairs.append(("reflection_usd", fmt_float(used.get("reflection_usd"), 6)))
        pairs.append(("reflection_calls", designer_calls_text(used, "reflection")))
    if best:
        pairs.append(
            ("apply", f"topology-studio apply {run_id} {int(best[0]['candidate_idx'])} --phase 2")
        )
    if run.status == "interrupted":
        pairs.append(
            ("resume", f"topology-studio search {run.problem or 'PROBLEM'} --resume {run_id}")
        )
    out.kv(pairs)


def cmd_diff(args: argparse.Namespace, out: Output) -> int:
    """`diff RUN CANDIDATE [--against N]`: structural and unified diff of two candidates."""
    with open_cli_store(resolve_db_path(args.db), out) as store:
        run_id = resolve_run_id(store, args.run)
        before = candidate_spec(store, run_id, args.against)
        after = candidate_spec(store, run_id, args.candidate)
    out.heading(f"Structural diff: candidate {args.against} -> {args.candidate}")
    print_changes(out, structural_diff(before, after))
    out.heading("Unified diff (JSON)")
    text = unified_json_diff(
        before, after, fromfile=f"candidate {args.against}", tofile=f"candidate {args.candidate}"
    )
    out.line(text.rstrip("\n") if text else "(identical)")
    return ExitCode.OK


def _who(by: str | None) -> str:
    if by:
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "unknown")


def _store_apply_record(store: RunStore, version: int, record: dict[str, Any]) -> bool:
    """Record an applied version's proposal and approval in the store, once: nothing when an
    approval already names `version` for the target; only the approval when its proposal was
    recorded before a kill (same target, base, run, candidate and proposer, undecided).

    Returns:
        True if it recorded something, False if the store had the record already.

    Raises:
        StoreError: the store refused the write.
    """
    target = str(record["target"])
    rows: list[dict[str, Any]] = [
        {k: _none_if_na(v) for k, v in r.items()}
        for r in store.list_proposals(target).to_dict("records")
    ]
    if any(r["applied_version"] == version for r in rows):
        return False
    same = [
        r
        for r in rows
        if r["decision"] is None
        and r["base_version"] == record["base_version"]
        and r["run_id"] == record["run_id"]
        and r["candidate_idx"] == record["candidate_idx"]
        and r["proposed_by"] == record["proposed_by"]
    ]
    if same:
        proposal_id = int(same[0]["proposal_id"])
    else:
        proposal_id = store.record_proposal(
            target,
            str(record["spec_json"]),
            spec_hash=record["spec_hash"],
            run_id=record["run_id"],
            candidate_idx=record["candidate_idx"],
            base_version=record["base_version"],
            diff=str(record["diff"]),
            proposed_by=str(record["proposed_by"]),
        )
        _apply_step("proposal")
    store.record_approval(
        proposal_id,
        who=str(record["who"]),
        comment=str(record["comment"]),
        base_version=record["base_version"],
        applied_version=version,
    )
    return True


def _apply_step(name: str) -> None:
    """A point between two steps of `apply --yes` in the store (`"proposal"`): does nothing.
    Crash tests replace it (and `core.search.registry._step`) to kill the process there."""


def _none_if_na(value: Any) -> Any:
    return None if is_missing(value) else value


def _recover_registry(registry: TopologyRegistry, store: RunStore, out: Output) -> None:
    """Finish what a killed `apply --yes` left: the registry's own recovery (complete or roll
    back the write, remove temporary files), then the store's record of a completed write."""
    report = registry.recover()
    for name, version in report.rolled_back:
        out.note(
            f"note: rolled back an interrupted write of {registry.root}/{name} version "
            f"{version} (its spec was never written)"
        )
    for pending in report.to_record:
        where = f"{registry.root}/{pending.name} version {pending.version}"
        if store.read_only:
            out.note(f"note: {where} was written by an interrupted apply; its approval is "
                     "recorded in the store once the database is writable")  # fmt: skip
            continue
        try:
            recorded = _store_apply_record(store, pending.version, pending.record)
        except StoreError as exc:
            out.note(f"note: {where}: its approval could not be recorded in the store: {exc}")
            continue
        registry.settle(pending.name, pending.version)
        if recorded:
            out.note(f"note: recorded the approval of {where} (an interrupted apply wrote it)")


def _unrecorded_versions(registry: TopologyRegistry, store: RunStore, name: str) -> list[int]:
    """The registry versions of `name` that no approval in the store names as applied."""
    rows = store.list_proposals(f"{registry.root}/{name}").to_dict("records")
    applied = {int(v) for r in rows if (v := _none_if_na(r["applied_version"])) is not None}
    return [rec.version for rec in registry.history(name) if rec.version not in applied]


def _prompt_plan(
    store: RunStore,
    registry: TopologyRegistry,
    run_id: str,
    candidate: int,
    name: str,
    winner: TopologySpec,
    only: str | None,
) -> PromptApplyPlan:
    """What `apply` writes for a phase-2 run's candidate: both parts, or `--only` one.

    Raises:
        CliUsageError: the candidate's recorded prompts cannot be read.
        ApplyError: the part cannot be applied (`plan_apply`: no current topology for the
            prompts alone, a registered agent's prompt), named.
    """
    run = store.get_run(run_id)
    phase2 = prompt_run(run_id, run.strategy, run.config) if run is not None else None
    assert phase2 is not None
    thoughts = {
        int(r["candidate_idx"]): str(r["thought"] or "")
        for r in store.archive_records(run_id, include_unevaluated=True)
    }
    try:
        prompts = evolved_prompts(thoughts, candidate, phase2.genes)
    except ValueError as exc:
        raise CliUsageError(f"candidate {candidate} of run {run_id}: {exc}") from exc
    current = registry.current(name)[1] if registry.current_version(name) is not None else None
    part: Part = "both" if only is None else "topology" if only == "topology" else "prompts"
    return plan_apply(name, winner, current, prompts, part)


def _print_prompt_plan(out: Output, plan: PromptApplyPlan, current: TopologySpec | None) -> None:
    """A phase-2 apply's two parts: the topology part's structural diff (the registry's
    current topology -> the search's winner) and each prompt's word-level diff."""
    if plan.part != "prompts":
        out.heading("Topology part: the search's winner")
        print_changes(out, structural_diff(current, plan.topology))
    if plan.part == "topology":
        return
    out.heading("Prompt part (word diff: [-removed-] {+added+})")
    if not plan.prompts:
        out.line("(phase 2 changed no prompt: candidate 0's starting prompts)")
    for d in plan.prompts:
        out.line(f"{d.gene_name}: {d.words if d.changed else '(unchanged)'}")


def cmd_apply(args: argparse.Namespace, out: Output) -> int:
    """`apply RUN CANDIDATE [--to PATH] [--yes]`: diff against a topology registry (default: the
    studio's, `studio.registry_root.default_registry_root`); write with
    `--yes` (atomic, refused if the registry changed since the diff), recording the approval
    in the registry and, when the database is writable, in the run store.

    The store records the proposal and its approval only once the registry holds the new
    version: a registry that refuses the write (`ApplyError`, e.g. `"cannot write registry
    PATH: <why>"`, or `StaleTargetError`) is one error line (exit 2) and leaves nothing
    recorded, since nothing was applied.

    The write and its record are one recoverable step: the registry journals the write with the
    proposal and approval to record (`TopologyRegistry.write(record=...)`), and the next `apply`
    completes or rolls back what a killed one left (`_recover_registry`) before anything else.
    The registry's versions of the topology that the store has no record of are listed.

    A phase-2 (prompt) run's candidate (`studio.views.prompt_apply`) is its topology part (the
    search's winner) and its prompt part (each evolved prompt, shown as a word diff): both are
    written as one version, or `--only topology` / `--only prompts` writes one part (the other
    rejected), in the same all-or-nothing write.

    A spec that routes on learned conditions gets their artefacts from the run's journal
    (`core.search.learned.artefacts_from_journals`), written into `learned/` beside the registry's spec files before the
    version (`core.search.apply`)."""
    db = resolve_db_path(args.db)
    # the studio's registry (the same root, so the store records the same target as the
    # studio's `registry_target`), unless --to says otherwise (made absolute, so the recorded
    # target does not depend on the directory the command ran from)
    if args.to is None:
        registry = TopologyRegistry(default_registry_root(db))
    else:
        registry = TopologyRegistry(Path(args.to).expanduser().resolve())
    if registry.root.exists() and not registry.root.is_dir():
        where = "the studio's registry" if args.to is None else "--to"
        raise CliUsageError(
            f"{where} {registry.root}: not a directory (a topology registry is a folder)"
        )
    with open_cli_store(db, out) as store:
        _recover_registry(registry, store, out)
        run_id = resolve_run_id(store, args.run)
        run_ids = [run_id]
        if getattr(args, "phase", 1) == 2:  # phase 2 of the search: its own record
            second = store.phase_two_run(run_id)
            if second is None:
                raise CliUsageError(
                    f"run {run_id} has no phase 2 (prompts): it was not run with "
                    "search --then-prompts"
                )
            run_id = second
            run_ids.append(second)
        run = store.get_run(run_id)
        phase2 = prompt_run(run_id, run.strategy, run.config) if run is not None else None
        only: str | None = getattr(args, "only", None)
        if phase2 is None and only is not None:
            raise CliUsageError(
                f"--only is for a phase-2 (prompt) run; run {run_id} is a "
                f"{(run.strategy if run is not None else None) or 'topology'} run: apply it whole"
            )
        name = args.name or (run.problem if run is not None and run.problem else None)
        if not name:
            raise CliUsageError("the run has no problem name: give the topology's --name")
        if not store.read_only:
            missing = _unrecorded_versions(registry, store, name)
            if missing:
                out.note(
                    f"note: versions of {registry.root}/{name} with no record in the run store: "
                    f"{', '.join(map(str, missing))} (written by another tool or before the "
                    f"store recorded applies; each keeps its approval in its v*.meta.json)"
                )
        spec = candidate_spec(store, run_id, args.candidate)
        plan = None
        if phase2 is not None:
            plan = _prompt_plan(store, registry, run_id, args.candidate, name, spec, only)
            spec = plan.spec
        artefacts = {}
        if learned_names(spec):
            try:
                artefacts = artefacts_from_journals(journal_path(db, r) for r in run_ids)
            except (StoreError, ValueError) as exc:
                raise CliUsageError(
                    f"run {run_id}: its journal's learned artefacts: {exc}"
                ) from exc
        try:
            (shown,) = apply_specs({name: spec}, registry, dry_run=True)
        except ValueError as exc:
            raise CliUsageError(str(exc)) from exc
        base = "new topology" if shown.base_version is None else f"version {shown.base_version}"
        what = "" if plan is None else f" ({part_label(plan.part)})"
        out.heading(
            f"Apply run {run_id} candidate {args.candidate}{what} to {registry.root}/{name} "
            f"({base})"
        )
        if plan is not None:
            _print_prompt_plan(out, plan, shown.before)
            out.heading("Unified diff of what is written (JSON)")
        if plan is None or plan.part == "prompts":  # else the topology part's table, above
            print_changes(out, shown.structural)
        out.line(shown.unified.rstrip("\n") if shown.unified else "(identical)")
        if not shown.changed:
            out.line("nothing to write: the registry already holds this topology")
            return ExitCode.OK
        if not args.yes:
            out.line("dry run: nothing was written (add --yes to write it)")
            return ExitCode.OK
        who = _who(args.by)
        approval = Approval(by=who, comment=args.comment)
        note = f"run {run_id} candidate {args.candidate}" + (
            "" if plan is None else f" ({part_label(plan.part)})"
        )
        # write first, then record the proposal and its approval: a write the registry
        # refuses (unwritable, changed since the diff) raises before anything is recorded, so
        # the store never holds a proposal that no one will decide (the registry keeps the
        # approval with the version either way)
        spec_json = spec.model_dump_json()
        record: dict[str, Any] | None = None
        if not store.read_only:
            record = {
                "target": f"{registry.root}/{name}",
                "spec_json": spec_json,
                "spec_hash": spec_hash(spec),
                "run_id": run_id,
                "candidate_idx": args.candidate,
                "base_version": shown.base_version,
                "diff": shown.unified,
                "proposed_by": who,
                "who": who,
                "comment": args.comment,
            }
        # the registry journals the write with its record first: a write it refuses
        # (unwritable, changed since the diff) raises before anything is recorded, and a kill
        # at any step is completed or rolled back by the next apply (`_recover_registry`)
        (done,) = apply_specs(
            {name: spec},
            registry,
            dry_run=False,
            expected=[shown],
            approval=approval,
            note=note,
            records=None if record is None else {name: record},
            artefacts=artefacts,
        )
        version = int(done.new_version or 0)
        if record is None:
            out.note(
                "note: the database is read-only here; the approval is recorded in the registry "
                "only"
            )
        else:
            try:
                _store_apply_record(store, version, record)
                registry.settle(name, version)
            except StoreError as exc:
                out.note(
                    f"note: written, but the approval was not recorded in the store: {exc} (the "
                    "next apply records it)"
                )
        out.line(f"written: {registry.root}/{name} version {done.new_version} (approved by {who})")
        if artefacts and learned_names(spec):
            out.line(
                f"learned artefacts beside it: {registry.folder(name) / 'learned'} "
                f"({', '.join(learned_names(spec))})"
            )
    return ExitCode.OK
