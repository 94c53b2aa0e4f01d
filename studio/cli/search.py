"""`search PROBLEM`: run a topology search, record it and print its summary.

A search writes its run journal live (`<db>.journals/<run id>.jsonl`, so the studio can watch
it from another process) and, when it ends, the run store ingests the journal and the summary is
printed from the store's rows: the validation Pareto front, the best topology and its held-out
test score. If another process (the studio) holds the database, the journal alone records the
run (the holder ingests it) and the summary comes from a read-only view of the journals.

A database that no process could use (not a DuckDB file, a directory, a file this user cannot
write, a newer schema) is refused before anything runs, so a search never runs to its end only
to find it cannot record its results. What a run starts from, and what `--resume` checks, is
`studio.cli._setup`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
from pathlib import Path

from pydantic import ValidationError
from pydantic_ai.exceptions import UserError

from core.agents.providers import apply_base_url, use_policy
from core.agents.rate_budget import RateBudget
from core.errors import (
    BudgetError,
    JournalWriteError,
    ProviderError,
    StoreBusyError,
    StoreError,
    TopologyStudioError,
    is_query_interrupt,
)
from core.evaluation.call_cache import DuckDBCallCache, call_cache_path
from core.problems import Problem
from core.problems._prices import cost_basis
from core.search.engine import build_search
from core.search.result import OptimizationResult
from core.search.subscribers import HealthRecorder
from core.storage import DuckDBRunStore, journal_path, open_store
from studio.cli._common import CliInterrupted, CliUsageError, ExitCode, resolve_db_path
from studio.cli._executor import effective_rate_limits, make_executor
from studio.cli._output import Output
from studio.cli._progress import SearchProgress
from studio.cli._setup import SearchSetup, first_error, new_setup, recorded_setup

__all__ = [
    "check_store",
    "cmd_search",
    "replays_only",
    "run_and_report",
    "run_cli_search",
]


def run_cli_search(setup: SearchSetup, out: Output) -> OptimizationResult:
    """Run the search with its journal and progress bar as subscribers.

    Raises:
        CliUsageError: a strategy option out of range.
        TopologyStudioError: what the engine raises (budget, degenerate seed, ...).
    """
    progress = SearchProgress(out, setup.budget.max_evaluations)
    executor = setup.executor
    # on a remote executor the driver keeps the workers' health current for the Runs page
    health = (
        HealthRecorder(executor, setup.db, setup.run_id)
        if executor is not None and setup.db is not None
        else None
    )
    local_budget = RateBudget(setup.rate_limits) if executor is None and setup.rate_limits else None
    call_cache = _call_cache(setup)
    try:
        search = build_search(
            setup.problem,
            setup.strategy,
            config=setup.config,
            seed=setup.seed,
            model=setup.model,
            budget=setup.budget,
            run_id=setup.run_id,
            subscribers=[setup.journal.append, progress, *([health] if health else [])],
            resume_from=list(setup.journal.recorded) if setup.resumed else None,
            use_test_split=setup.use_test_split,
            test_size=setup.test_size,
            call_cache=call_cache,
            executor=executor,
            rate_budget=local_budget,
        )
    except TopologyStudioError:
        raise
    except ValidationError as exc:
        raise CliUsageError(f"invalid search option {first_error(exc)}") from exc
    except ValueError as exc:
        raise CliUsageError(str(exc)) from exc
    if executor is not None:
        # connected now, so the run records its workers (`describe()`) and a bad address or a
        # problem the workers cannot load fails before the run starts
        executor.start()
    # What is loaded now (modules, the problem's data, the call cache) lives as long as the
    # process: out of the collector's sight, its full collections stop walking it (the `gc`
    # module's own advice for a long-lived startup heap; also what keeps the pages a forked
    # evaluation worker shares untouched, core.evaluation._fork)
    gc.freeze()
    if health is not None:
        health.start()
    try:
        with progress:
            try:
                return asyncio.run(search.run())
            except asyncio.CancelledError:
                # a second Ctrl-C where asyncio.run had no handler of its own: the search
                # unwound and recorded itself as stopped, as under asyncio.run's handler
                raise KeyboardInterrupt from None
    finally:
        setup.interrupted = search.stop.reason() == "SIGINT"
        if call_cache is not None:
            call_cache.flush()
            setup.call_cache_line = call_cache.stats().summary_line()
        if health is not None:
            health.close()  # a last snapshot, before the workers go
        if executor is not None:
            executor.close()


def _call_cache(setup: SearchSetup) -> DuckDBCallCache | None:
    """The search's call cache: `<db>.calls.duckdb`, namespaced by the problem's name and
    config hash; None with `--no-call-cache`."""
    if setup.db is None or not setup.use_call_cache:
        return None
    problem = setup.problem
    return DuckDBCallCache(call_cache_path(setup.db), f"{problem.name}:{problem.config_hash}")


def check_store(db: Path) -> None:
    """Fail before the search when the database exists but no process could record the run
    in it; a database held by another process is fine (the holder ingests the journal).

    A missing database is created when the run ends (its folder is checked with the
    journal's), so nothing is created here.

    Every row is read once (`DuckDBRunStore.check`), so a damaged file is refused now rather
    than after the whole search, when its run could not be stored.

    Raises:
        StoreError: `db` is not a DuckDB file, is a directory, cannot be written, or has a
            newer schema (the same line `runs --db` prints).
        StoreCorruptError: `db` is damaged (the line names `store rebuild`).
    """
    if not db.exists():
        return
    try:
        store = open_store(db)
    except StoreBusyError:
        return
    try:
        if isinstance(store, DuckDBRunStore):
            store.check()
    finally:
        store.close()


def _resume_hint(setup: SearchSetup, db: Path) -> str:
    """How to continue the run: the problem as it was given on the command line."""
    return (
        f"interrupted: continue with 'topology-studio search {setup.problem_ref} --resume "
        f"{setup.run_id} --db {db}'"
    )


def replays_only(problem: Problem, model: str | None = None) -> bool:
    """True when `problem`'s costs are modelled (`core.problems._prices.cost_basis` of its
    `[models.prices]` is `"replayed"`, as gsm8k_replay's are; the studio's runs table says
    `replayed (modelled)` by the same rule) and no `--model` replaces its models."""
    return model is None and cost_basis(problem.prices) == "replayed"


def _report(
    db: Path, run_id: str, out: Output, *, modelled_cost: bool = False, all_objectives: bool = False
) -> str | None:
    """Ingest the journal and print the run from the store (or from the journals when another
    process holds the database); return the run's stop reason (e.g. `"SIGINT"`).
    `modelled_cost`: say the run's cost is modelled (`replays_only`); `all_objectives`: print the
    front over all five objectives (`print_run`)."""
    try:
        store = open_store(db)
    except StoreBusyError:
        out.note(
            f"note: {db} is held by another process (the studio?): the run is recorded in its "
            "journal, which that process ingests; the summary below is read from the journals"
        )
        store = open_store(db, on_busy="journals")
    try:
        store.ingest()
        # imported here: pandas (about 75 MiB with pyarrow) loads for the report, after the search
        from studio.cli.runs import print_run

        print_run(store, run_id, out, modelled_cost=modelled_cost, all_objectives=all_objectives)
        run = store.get_run(run_id)
        reason = None if run is None else run.reason
    finally:
        store.close()
    out.heading("Next")
    out.kv(
        [
            ("run", run_id),
            ("database", str(db)),
            ("journal", str(journal_path(db, run_id))),
            ("show", f"topology-studio show {run_id} --db {db}"),
            ("studio", f"topology-studio studio --db {db}   (then open the run {run_id})"),
        ]
    )
    return reason


def _drop_if_empty(setup: SearchSetup) -> bool:
    """Remove a new run's journal that recorded nothing (the run never started); True if so."""
    path = setup.journal.path
    if setup.resumed or not path.is_file() or path.stat().st_size > 0:
        return False
    path.unlink()
    return True


def run_and_report(setup: SearchSetup, db: Path, out: Output) -> int:
    """Run the search (journal closed afterwards), then ingest and print; 1 if the run failed.

    A search that fails before its first event (an option or a model the strategy refuses) is a
    bad input: its empty journal is removed and the error raised (exit 2), so no empty run is
    left for `runs` or the studio to show.
    """
    failed: Exception | None = None
    try:
        with setup.journal:
            try:
                apply_base_url(setup.problem.config.models.base_url)
                with use_policy(setup.problem.provider_policy):
                    setup.result = run_cli_search(setup, out)
            except (TopologyStudioError, UserError) as exc:
                failed = exc
    except KeyboardInterrupt:
        # a second Ctrl-C: the run was cancelled and recorded as stopped, nothing printed
        if _drop_if_empty(setup):
            raise
        raise CliInterrupted(_resume_hint(setup, db)) from None
    except BaseException as exc:
        if _drop_if_empty(setup):
            raise
        if is_query_interrupt(exc):  # the second Ctrl-C reached a DuckDB query
            raise CliInterrupted(_resume_hint(setup, db)) from None
        raise
    if failed is not None and _drop_if_empty(setup):
        raise CliUsageError(str(failed)) from failed
    if isinstance(failed, BudgetError):
        raise failed
    if isinstance(failed, ProviderError):
        # a provider that kept failing (or refused): the run is stopped, resumable
        out.error(str(failed))
        out.note(_resume_hint(setup, db))
        return ExitCode.INTERRUPTED
    if isinstance(failed, JournalWriteError):
        # e.g. a full disk: every complete line is kept, so the run resumes where it stopped
        hint = _resume_hint(setup, db).removeprefix("interrupted: ")
        out.error(f"{failed}: free space, then {hint}")
        return ExitCode.FAILED
    if failed is not None:
        out.error(f"{failed} (run {setup.run_id} failed; its journal: {setup.journal.path})")
        diagnosis = getattr(failed, "diagnosis", "")
        if diagnosis:
            out.note(f"diagnosis: {diagnosis}")
        return ExitCode.FAILED
    try:
        reason = _report(
            db,
            setup.run_id,
            out,
            modelled_cost=replays_only(setup.problem, setup.model),
            all_objectives=setup.all_objectives,
        )
        if setup.call_cache_line is not None:
            out.line(setup.call_cache_line)
    except KeyboardInterrupt:
        raise CliInterrupted(_resume_hint(setup, db)) from None
    except RuntimeError as exc:  # a Ctrl-C that reached the ingest's DuckDB query
        if not is_query_interrupt(exc):
            raise
        raise CliInterrupted(_resume_hint(setup, db)) from None
    except StoreError as exc:  # e.g. the database was replaced while the search ran
        raise CliUsageError(
            f"{exc} (run {setup.run_id} is recorded in its journal {setup.journal.path}: a "
            f"later command on a usable --db {db} ingests it)"
        ) from exc
    if setup.interrupted or reason == "SIGINT":
        # stopped cleanly by Ctrl-C (in the generations, the re-scoring or the held-out test:
        # the run's reason then says where): the summary is printed, but a script must not go on
        out.note(_resume_hint(setup, db))
        return ExitCode.INTERRUPTED
    return ExitCode.OK


def cmd_search(args: argparse.Namespace, out: Output) -> int:
    """`search PROBLEM [...]` or `search PROBLEM --resume RUN`."""
    from studio.cli._prompts import prompt_phase_from_args, recorded_prompt_phase, run_prompt_phase

    db = resolve_db_path(args.db)
    phase = prompt_phase_from_args(args)  # refused before the search when it cannot run
    if args.resume:  # a phase 2 interrupted after this search continues with its own settings
        phase = recorded_prompt_phase(db, args.resume, phase)
    check_store(db)
    setup = recorded_setup(args, db, out) if args.resume else new_setup(args, db)
    setup.db = db
    setup.all_objectives = getattr(args, "objectives", "accuracy-cost") == "all"
    setup.use_call_cache = not getattr(args, "no_call_cache", False)
    setup.executor = make_executor(args, setup.problem)
    setup.rate_limits = effective_rate_limits(setup.problem, args)
    if setup.note:
        out.line(setup.note)
    code = run_and_report(setup, db, out)
    if phase is None or code != ExitCode.OK or setup.result is None:
        return code
    try:
        with use_policy(setup.problem.provider_policy):
            run_prompt_phase(setup.problem, setup.result, setup.run_id, phase, db, out)
    except ProviderError as exc:  # the reflection model kept failing: resumable, as Ctrl-C is
        out.error(f"phase 2 (prompts): {exc}")
        out.note(_phase_two_hint(setup, db))
        return ExitCode.INTERRUPTED
    except TopologyStudioError as exc:
        out.error(f"phase 2 (prompts): {exc}")
        return ExitCode.FAILED
    except KeyboardInterrupt:
        raise CliInterrupted(_phase_two_hint(setup, db)) from None
    return ExitCode.OK


def _phase_two_hint(setup: SearchSetup, db: Path) -> str:
    return (
        f"interrupted in phase 2: the search run {setup.run_id} is recorded and so is every "
        f"call phase 2 made; continue with 'topology-studio search {setup.problem_ref} "
        f"--resume {setup.run_id} --db {db}'"
    )
