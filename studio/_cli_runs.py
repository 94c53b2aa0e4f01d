"""`runs`, `show RUN`, `diff RUN CANDIDATE`, `apply RUN CANDIDATE [--to PATH] [--yes]`."""

from __future__ import annotations

import argparse
import getpass
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from core.errors import SpecError, StoreError
from core.ir import TopologySpec, parse_topology
from core.ir.diff import structural_diff, unified_json_diff
from core.ir.limits import MAX_DEPTH_CEILING, SpecLimits
from core.search.apply import apply_specs
from core.search.registry import Approval, TopologyRegistry
from core.storage import IngestError, RunStore
from studio._cli_common import CliUsageError, ExitCode, resolve_db_path
from studio._cli_output import Output, fmt_float
from studio._cli_report import front_legend, print_changes, print_front, print_spec
from studio._cli_results import print_test_front
from studio._cli_store import open_cli_store

__all__ = [
    "candidate_spec",
    "cmd_apply",
    "cmd_diff",
    "cmd_runs",
    "cmd_show",
    "print_run",
    "resolve_run_id",
]

_READ_LIMITS = SpecLimits(max_depth=MAX_DEPTH_CEILING, max_nodes=100_000)


def _ts(value: Any) -> str:
    try:
        if value is None or pd.isna(value):
            return "-"
    except (TypeError, ValueError):
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
    archive = store.archive(run_id, include_unevaluated=True)
    rows = archive[archive["candidate_idx"] == candidate] if not archive.empty else archive
    if rows.empty:
        n = len(archive)
        raise CliUsageError(
            f"run {run_id} has no candidate {candidate} (it has {n} candidate(s): 0..{n - 1})"
        )
    spec_hash = str(rows.iloc[0]["spec_hash"] or "")
    text = store.get_spec(spec_hash) if spec_hash else None
    if not text:
        reason = rows.iloc[0].get("reason")
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


def print_run(store: RunStore, run_id: str, out: Output) -> dict[str, Any]:
    """Print a run's summary, its validation Pareto front, and its best topology with the
    held-out test score; return the figures printed (for `search`'s own summary).

    The summary says how many lines of the run's journal were skipped (not valid events, so
    not stored; `RunStore.list_ingest_errors`) when there are any."""
    run = store.get_run(run_id)
    if run is None:
        raise CliUsageError(f"no run {run_id!r} in the database")
    # the front and the winner on the full validation split only: compare like with like
    archive = store.archive(run_id, split="validation")
    out.heading(f"Run {run_id}")
    used = run.budget_used
    pairs: list[tuple[str, Any]] = [
        ("problem", run.problem or "-"),
        ("strategy", run.strategy or "-"),
        ("seed", run.seed if run.seed is not None else "-"),
        ("status", run.status + (f" ({run.reason})" if run.reason else "")),
        ("started", _ts(run.started_at)),
        ("evaluations", int(used.get("evaluations", 0)) if used else "-"),
        ("cost_usd_total", fmt_float(used.get("usd"), 6) if used else "-"),
        ("wall_s", fmt_float(used.get("wall_s"), 1) if used else "-"),
    ]
    skipped = store.list_ingest_errors(run_id)
    if skipped:
        pairs.append(("skipped_lines", _skipped_text(skipped)))
    out.kv(pairs)
    weights = run.config.get("weights")
    n_validation = run.config.get("n_validation")
    legend = front_legend(
        weights if isinstance(weights, dict) else None,
        n_validation if isinstance(n_validation, int) else None,
    )
    print_front(out, archive, title="Pareto front (validation)", legend=legend)
    print_test_front(out, store.test_front(run_id))
    best = archive[archive["is_best"].astype(bool)] if not archive.empty else archive
    figures: dict[str, Any] = {"best_idx": None, "test_accuracy": None}
    if best.empty:
        out.line("no valid best candidate")
        return figures
    row = best.iloc[0]
    idx = int(row["candidate_idx"])
    figures["best_idx"] = idx
    out.heading(f"Best topology (candidate {idx})")
    print_spec(out, candidate_spec(store, run_id, idx))
    test_acc = row.get("test_accuracy")
    test_score = row.get("test_aggregate_score")
    if test_acc is not None and not pd.isna(test_acc):
        figures["test_accuracy"] = float(test_acc)
        out.line(
            f"held-out test: accuracy {fmt_float(test_acc, 4)}, score "
            f"{fmt_float(test_score, 4)} (candidate {idx})"
        )
    else:
        out.line("held-out test: not evaluated")
    return figures


def cmd_runs(args: argparse.Namespace, out: Output) -> int:
    """`runs`: every recorded run, newest first."""
    db = resolve_db_path(args.db)
    with open_cli_store(db, out) as store:
        runs = store.list_runs()
        if runs.empty:
            out.line(f"no runs recorded in {db}")
            return ExitCode.OK
        rows: list[list[str]] = []
        for r in runs.to_dict("records"):
            rows.append(
                [
                    str(r["run_id"]),
                    str(r["problem"] or "-"),
                    str(r["strategy"] or "-"),
                    str(r["status"]),
                    _ts(r["started_at"]).replace(" ", "T"),
                    str(int(r["n_candidates"] or 0)),
                    str(int(r["n_evaluations"] or 0)),
                    fmt_float(r["cost_usd"], 6),
                    "-" if pd.isna(r["best_idx"]) else str(int(r["best_idx"])),
                    fmt_float(None if pd.isna(r["best_score"]) else r["best_score"], 4),
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
                "evaluations",
                "cost_usd",
                "best",
                "best_score",
            ),
            rows,
            right=("candidates", "evaluations", "cost_usd", "best", "best_score"),
        )
    return ExitCode.OK


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    """`show RUN`: summary, front, best topology and test score."""
    with open_cli_store(resolve_db_path(args.db), out) as store:
        print_run(store, resolve_run_id(store, args.run), out)
    return ExitCode.OK


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


def cmd_apply(args: argparse.Namespace, out: Output) -> int:
    """`apply RUN CANDIDATE [--to PATH] [--yes]`: diff against a topology registry (default: the
    studio's, `studio.manager.default_registry_root`); write with
    `--yes` (atomic, refused if the registry changed since the diff), recording the approval
    in the registry and, when the database is writable, in the run store.

    The store records the proposal and its approval only once the registry holds the new
    version: a registry that refuses the write (`ApplyError`, e.g. `"cannot write registry
    PATH: <why>"`, or `StaleTargetError`) is one error line (exit 2) and leaves nothing
    recorded, since nothing was applied."""
    from studio.manager import default_registry_root  # only apply needs the studio's manager

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
        run_id = resolve_run_id(store, args.run)
        run = store.get_run(run_id)
        name = args.name or (run.problem if run is not None and run.problem else None)
        if not name:
            raise CliUsageError("the run has no problem name: give the topology's --name")
        spec = candidate_spec(store, run_id, args.candidate)
        try:
            (shown,) = apply_specs({name: spec}, registry, dry_run=True)
        except ValueError as exc:
            raise CliUsageError(str(exc)) from exc
        base = "new topology" if shown.base_version is None else f"version {shown.base_version}"
        out.heading(
            f"Apply run {run_id} candidate {args.candidate} to {registry.root}/{name} ({base})"
        )
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
        note = f"run {run_id} candidate {args.candidate}"
        # write first, then record the proposal and its approval: a write the registry
        # refuses (unwritable, changed since the diff) raises before anything is recorded, so
        # the store never holds a proposal that no one will decide (the registry keeps the
        # approval with the version either way)
        (done,) = apply_specs(
            {name: spec}, registry, dry_run=False, expected=[shown], approval=approval, note=note
        )
        if store.read_only:
            out.note(
                "note: the database is held by another process; the approval is recorded "
                "in the registry only"
            )
        else:
            try:
                proposal_id = store.record_proposal(
                    f"{registry.root}/{name}",
                    spec.model_dump_json(),
                    run_id=run_id,
                    candidate_idx=args.candidate,
                    base_version=shown.base_version,
                    diff=shown.unified,
                    proposed_by=who,
                )
                store.record_approval(
                    proposal_id,
                    who=who,
                    comment=args.comment,
                    base_version=shown.base_version,
                    applied_version=done.new_version,
                )
            except StoreError as exc:
                out.note(f"note: written, but the approval was not recorded in the store: {exc}")
        out.line(f"written: {registry.root}/{name} version {done.new_version} (approved by {who})")
    return ExitCode.OK
