"""`search`, `demo` and `evaluate`: the commands that run topologies.

A search writes its run journal live (`<db>.journals/<run id>.jsonl`, so the studio can watch
it from another process) and, when it ends, the run store ingests the journal and the summary is
printed from the store's rows: the validation Pareto front, the best topology and its held-out
test score. If another process (the studio) holds the database, the journal alone records the
run (the holder ingests it) and the summary comes from a read-only view of the journals.

A database that no process could use (not a DuckDB file, a directory, a file this user cannot
write, a newer schema) is refused before anything runs, so a search never runs to its end only
to find it cannot record its results. `search PROBLEM --resume RUN` continues the run with the
options it was started with; an option that differs from them is refused (a different budget,
seed or strategy would not continue the same run), except those that change only how fast it runs
(`--concurrency`, `--time-scale`). The problem is always the one given on the command line, never
one the journal names (a journal is data: it never chooses the code that is loaded); it must be
the recorded problem, same name and same files hash (`Problem.files_sha256`), else it is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError
from pydantic_ai.exceptions import UserError

from core.agents.providers import apply_base_url, use_policy
from core.agents.rate_budget import ProviderLimit, RateBudget
from core.errors import (
    BudgetError,
    JournalWriteError,
    ProviderError,
    SpecError,
    StoreBusyError,
    StoreError,
    TopologyStudioError,
    is_query_interrupt,
)
from core.evaluation.call_cache import DuckDBCallCache, call_cache_path
from core.evaluation.evaluator import CandidateEvaluation, ExampleResult, TopologyEvaluator
from core.evaluation.executor import Executor
from core.evaluation.metrics import GoldExample
from core.ir import TopologySpec, parse_topology
from core.problems import Problem, default_cache_root, load_problem
from core.problems._prices import cost_basis
from core.search.budget import Budget
from core.search.engine import build_search
from core.search.events import RunStarted
from core.search.result import OptimizationResult
from core.search.strategies import strategy_config_class
from core.search.subscribers import HealthRecorder
from core.storage import (
    DuckDBRunStore,
    ResumeState,
    RunJournal,
    journal_path,
    new_run_id,
    open_store,
    read_journal,
)
from studio.cli._common import (
    CliInterrupted,
    CliUsageError,
    ExitCode,
    parse_overrides,
    resolve_db_path,
)
from studio.cli._executor import effective_rate_limits, make_executor
from studio.cli._output import Output, fmt_float
from studio.cli._progress import SearchProgress
from studio.cli._report import structure_line
from studio.cli.studio import launch_studio

__all__ = [
    "DEMO_BUDGET",
    "DEMO_PROBLEM",
    "cmd_demo",
    "cmd_evaluate",
    "cmd_search",
    "demo_data",
    "root_cause",
]

DEMO_PROBLEM = "gsm8k_replay"
"""The problem the demo searches (offline: replayed GPT-3 runs)."""

DEMO_BUDGET: dict[str, int] = {
    "max_evaluations": 10,
    "minibatch_size": 10,
    "validation_size": 100,
    "test_size": 100,
}
"""The demo's short search: 10 candidate evaluations on minibatches of 10, offline, on the first
100 validation problems (by the problem's hash order: `gold.validation_size` 100) and a held-out
test of the first 100 test problems (`build_search`'s `test_size`). Each example run of a cold
replayed topology costs about 4.4 ms of one core (cProfile of `demo --no-ui`: pydantic-ai's
`Agent.run` under `core.agents.usage.run_agent` is most of it), and the full splits (300
validation for every candidate, 719 test for each front candidate) made the demo ~40 s cold;
these sizes make it ~10 s. `full search` runs the real thing."""

_NOT_STRATEGY_KEYS = frozenset(
    {"strategy", "budget", "gene", "evaluator", "n_validation", "n_test"}
)


_SPEED_SETTINGS = frozenset({"models.time_scale", "search.concurrency", "search.workers"})
"""Problem settings that change how fast a run goes, not what it computes: a resumed run may
take other values (`--time-scale`, `--concurrency`, `--workers`, or `--set` of these)."""

_BUDGET_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("max_evaluations", "max_evaluations", "--max-evaluations"),
    ("max_usd", "max_usd", "--max-usd"),
    ("max_wall_s", "max_wall_time_s", "--max-wall-s"),
    ("patience", "patience", "--patience"),
)
"""`Budget` field, the problem's `[search]` key, the command-line flag."""


def _speed_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if getattr(args, "time_scale", None) is not None:
        overrides["models.time_scale"] = args.time_scale
    if getattr(args, "concurrency", None) is not None:
        overrides["search.concurrency"] = args.concurrency
    if getattr(args, "workers", None) is not None:
        overrides["search.workers"] = args.workers
    return overrides


def _problem_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = parse_overrides(list(getattr(args, "overrides", []) or []))
    if getattr(args, "meta_model", None):
        overrides["search.meta_model"] = args.meta_model  # recorded, so a resume can check it
    if getattr(args, "traces", False):
        overrides["search.traces"] = True  # recorded: a resume keeps it
    if getattr(args, "example_timeout_s", None) is not None:
        overrides["evaluation.example_timeout_s"] = args.example_timeout_s  # recorded
    overrides.update(_speed_overrides(args))
    return overrides


def _budget(problem: Problem, args: argparse.Namespace) -> Budget:
    """The problem's `[search]` limits, each replaced by its flag when given.

    Raises:
        BudgetError: a limit of 0 from the problem (its `[search]` table or `--set`; the flags
            refuse 0 themselves), naming the setting and the flag that replaces it.
    """
    s = problem.search

    def pick(flag: str, default: Any) -> Any:
        value = getattr(args, flag, None)
        return default if value is None else value

    budget = Budget(
        max_evaluations=pick("max_evaluations", s.max_evaluations),
        max_usd=pick("max_usd", s.max_usd),
        max_wall_s=pick("max_wall_s", s.max_wall_time_s),
        patience=pick("patience", s.patience),
    )
    for field, key, flag in _BUDGET_FLAGS:
        if getattr(budget, field) == 0:
            raise BudgetError(
                f"problem {problem.name}: search.{key} = 0 allows no work: give {flag} with a "
                f"value above 0, or change search.{key} in its problem.toml (or the --set that "
                "gave it)"
            )
    budget.validate_allows_work()
    return budget


def _strategy_options(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if getattr(args, "generations", None) is not None:
        config["n_generations"] = args.generations
    if getattr(args, "minibatch_size", None) is not None:
        config["minibatch_size"] = args.minibatch_size
    if getattr(args, "max_nodes", None) is not None:
        config["max_nodes"] = args.max_nodes
    return config


def _exhaustive_budget(
    problem: Problem, config: dict[str, Any], budget: Budget, given: bool
) -> tuple[Budget, str]:
    """The exhaustive strategy's count, said before it starts, and its default budget: the
    count + 1 evaluations (the seed is one) unless `--max-evaluations` was `given`.

    Raises:
        CliUsageError: an exhaustive option out of range.
    """
    from core.search.operators import MutationContext
    from core.search.strategies.exhaustive import ExhaustiveConfig, enumerate_topologies

    try:
        cfg = ExhaustiveConfig.model_validate(config)
    except ValidationError as exc:
        raise CliUsageError(f"invalid search option {_first_error(exc)}") from exc
    space = build_search(problem, "exhaustive", config=config).space
    found = enumerate_topologies(MutationContext.from_space(space), cfg.max_nodes, cfg)
    if not given:
        budget = budget.model_copy(update={"max_evaluations": found.count + 1})
    return budget, found.summary()


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


class _SearchSetup:
    """Everything a search run needs, resolved from the command line (or a recorded run)."""

    def __init__(
        self,
        *,
        problem: Problem,
        strategy: str,
        seed: int | None,
        config: dict[str, Any],
        budget: Budget,
        model: str | None,
        use_test_split: bool,
        run_id: str,
        journal: RunJournal,
        resumed: bool,
        test_size: int | None = None,
    ) -> None:
        self.problem = problem
        self.strategy = strategy
        self.seed = seed
        self.config = config
        self.budget = budget
        self.model = model
        self.use_test_split = use_test_split
        self.test_size = test_size
        """The held-out test's size cap (`build_search`'s `test_size`; None: the whole split)."""
        self.run_id = run_id
        self.journal = journal
        self.resumed = resumed
        self.problem_ref = problem.name
        """The problem as given on the command line (a name or a path), for the resume hint."""
        self.note: str | None = None
        """A line to print before the run (the exhaustive strategy's count)."""
        self.all_objectives = False
        """Print the front over all five objectives, not (accuracy, cost) (`--objectives all`)."""
        self.db: Path | None = None
        """The run store; the call cache is kept beside it (`call_cache_path`)."""
        self.use_call_cache = True
        """False with `--no-call-cache`."""
        self.executor: Executor | None = None
        """Where evaluations run (`--executor`); None: local."""
        self.rate_limits: dict[str, ProviderLimit] = {}
        """The problem's `[rate_limits]` with `--rate-limit`s over them, for a local run (a remote
        executor holds its own budget)."""
        self.call_cache_line: str | None = None
        """`call cache: N hits of M calls (x%), K new model calls`, once the run ended."""
        self.interrupted = False
        """True once a Ctrl-C (SIGINT) asked the search to stop, in whichever phase."""
        self.result: OptimizationResult | None = None
        """The search's result once it ran (phase 2 of `--then-prompts` starts from it)."""


def _create_journal(db: Path, run_id: str) -> RunJournal:
    """A new run journal beside the database.

    Raises:
        CliUsageError: its folder cannot be created or written (e.g. `--db` below a file, or in
            a read-only place).
    """
    path = journal_path(db, run_id)
    try:
        return RunJournal.create(path)
    except OSError as exc:
        raise CliUsageError(
            f"cannot write the run journal {path.parent}/ under --db {db}: {exc} "
            "(give --db a path in a writable folder)"
        ) from exc


def _new_setup(args: argparse.Namespace, db: Path) -> _SearchSetup:
    problem = load_problem(args.problem, overrides=_problem_overrides(args))
    budget = _budget(problem, args)
    strategy = (args.strategy or problem.search.strategy).replace("-", "_")
    model = args.meta_model or problem.search.meta_model
    if strategy == "meta_agent" and not model:
        raise CliUsageError(
            "the meta-agent strategy needs a designer model: give --meta-model provider:model "
            "(e.g. openai:gpt-4o-mini, ollama:llama3.1) or set meta_model in the problem's "
            "[search] table"
        )
    config = _strategy_options(args)
    note = None
    if strategy == "exhaustive":
        given = getattr(args, "max_evaluations", None) is not None
        budget, note = _exhaustive_budget(problem, config, budget, given)
    elif "max_nodes" in config:
        raise CliUsageError("--max-nodes is an option of --strategy exhaustive only")
    run_id = getattr(args, "run_id", None) or new_run_id()  # a sweep names its runs first
    journal = _create_journal(db, run_id)
    setup = _SearchSetup(
        problem=problem,
        strategy=strategy,
        seed=args.seed,
        config=config,
        budget=budget,
        model=model,
        use_test_split=not args.no_test,
        run_id=run_id,
        journal=journal,
        resumed=False,
    )
    setup.note = note
    setup.problem_ref = str(args.problem)
    return setup


def _recorded_setting(problem_config: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """`(found, value)` of a dotted problem setting (`"gold.validation_size"`) in a recorded
    `RunStarted.problem_config`: its `--set` overrides first, then its resolved config."""
    overrides: Mapping[str, Any] = problem_config.get("overrides") or {}
    if key in overrides:
        return True, overrides[key]
    node: Any = problem_config.get("config") or {}
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = cast(Mapping[str, Any], node)[part]
    return True, node


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _recorded_traces(started: RunStarted) -> bool:
    """Whether the run records per-example traces: its `search.traces`; a run recorded before
    that setting existed always did."""
    found, traces = _recorded_setting(started.problem_config, "search.traces")
    return bool(traces) if found else True


def _changed_options(args: argparse.Namespace, started: RunStarted) -> list[str]:
    """The options given with `--resume` that differ from the recorded run's, each as
    `--flag VALUE (recorded: VALUE)`; speed settings and equal values are not listed."""
    changed: list[str] = []

    def differs(option: str, given: Any, recorded: Any) -> None:
        if given is not None and given != recorded:
            changed.append(f"{option} {_shown(given)} (recorded: {_shown(recorded)})")

    if args.strategy is not None and args.strategy.replace("-", "_") != started.strategy:
        changed.append(
            f"--strategy {args.strategy} (recorded: {started.strategy.replace('_', '-')})"
        )
    differs("--seed", args.seed, started.seed)
    budget: Mapping[str, Any] = started.config.get("budget") or {}
    for field, _, flag in _BUDGET_FLAGS:
        differs(flag, getattr(args, field), budget.get(field))
    differs("--generations", args.generations, started.config.get("n_generations"))
    differs("--minibatch-size", args.minibatch_size, started.config.get("minibatch_size"))
    evaluator: Mapping[str, Any] = started.config.get("evaluator") or {}
    differs("--example-timeout-s", args.example_timeout_s, evaluator.get("example_timeout_s"))
    n_test = int(started.config.get("n_test") or 0)
    if args.no_test and n_test:
        changed.append(f"--no-test (recorded: a held-out test split of {n_test} examples)")
    if args.meta_model and started.strategy == "meta_agent":
        found, model = _recorded_setting(started.problem_config, "search.meta_model")
        if found and model is not None:
            differs("--meta-model", args.meta_model, model)
    if getattr(args, "traces", False) and not _recorded_traces(started):
        changed.append("--traces (recorded: traces off)")
    for item in args.overrides or []:
        ((key, value),) = parse_overrides([item]).items()
        if key in _SPEED_SETTINGS:
            continue
        found, recorded = _recorded_setting(started.problem_config, key)
        if not found or value != recorded:
            changed.append(f"--set {item} (recorded: {_shown(recorded) if found else 'not set'})")
    return changed


_PROBLEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
"""What a recorded problem name must look like to be shown as a command to type."""


def _resume_command(started: RunStarted | None, run_id: str, db: Path) -> str:
    """`topology-studio search <recorded name> --resume RUN --db DB`, the recorded name only
    when it is a plain problem name (never a path that stored data chose), else `PROBLEM`."""
    name = started.problem if started is not None else ""
    shown = name if _PROBLEM_NAME.fullmatch(name) and not name.endswith(".toml") else "PROBLEM"
    return f"topology-studio search {shown} --resume {run_id} --db {db}"


def _problem_mismatch(problem: Problem, started: RunStarted) -> str | None:
    """Why `problem` (named on the command line) is not the recorded run's problem, or None.

    The run's `problem` name must match, and its recorded `problem_config.files_sha256` (the
    problem files' content hash; `code_sha256`, the module's, for a run recorded before it)
    must equal the loaded problem's."""
    recorded_cfg: Mapping[str, Any] = started.problem_config
    recorded_files = recorded_cfg.get("files_sha256")
    if recorded_files:
        kind, recorded, now = "files sha256", str(recorded_files), problem.files_sha256
    else:
        kind = "module sha256"
        recorded = str(recorded_cfg.get("code_sha256") or "")
        now = problem.code_sha256 if recorded else ""
    if problem.name == started.problem and recorded == now:
        return None
    return (
        f"recorded problem {started.problem!r} ({kind} {recorded[:12] or 'not recorded'}), "
        f"given problem {problem.name!r} at {problem.root} ({kind} {now[:12] or '-'})"
    )


def _resume_setup(args: argparse.Namespace, db: Path, out: Output) -> _SearchSetup:
    """The recorded run's setup, after checking that the problem and the options given agree
    with it.

    The problem is the one named on the command line (`search PROBLEM --resume RUN`), never
    one the journal names: a journal is stored data, and the only code loaded by path is a
    problem the researcher names. Its name and files hash must equal the recorded ones.

    Raises:
        CliUsageError: no journal for the run, nothing recorded, no PROBLEM given (the line
            says the command to type), a problem other than the recorded one (both named), a
            recorded `registries` override, or options that differ from the recorded ones
            (all named in one line; the journal is left untouched).
    """
    path = journal_path(db, args.resume)
    if not path.is_file():
        raise CliUsageError(
            f"no journal for run {args.resume!r} at {path}: give the run id that "
            "'topology-studio runs' lists, and the same --db"
        )
    if path.resolve().parent != path.parent.resolve():  # a symlink out of the journals folder
        raise CliUsageError(
            f"cannot resume run {args.resume}: its journal {path} leads outside "
            f"{path.parent} (to {path.resolve()}); a journal is read only inside its folder"
        )
    state = ResumeState.from_events(read_journal(path))  # read only: nothing changes yet
    started: RunStarted | None = state.started
    if started is None:
        raise CliUsageError(f"run {args.resume} recorded nothing to resume from ({path})")
    if not args.problem:
        raise CliUsageError(
            f"resuming run {args.resume} needs its problem on the command line (a journal never "
            f"chooses the code to load): {_resume_command(started, args.resume, db)}"
        )
    changed = _changed_options(args, started)
    recorded_problem: Mapping[str, Any] = started.problem_config
    overrides = dict(recorded_problem.get("overrides") or {})
    if "registries" in overrides:
        raise CliUsageError(
            f"run {args.resume} records an override of registries "
            f"({_shown(overrides['registries'])}): resume loads only the problem's own module, "
            "so start a new search instead"
        )
    overrides.update(_speed_overrides(args))
    for item in args.overrides or []:
        overrides.update({k: v for k, v in parse_overrides([item]).items() if k in _SPEED_SETTINGS})
    evaluator_cfg = started.config.get("evaluator") or {}
    if "concurrency" in evaluator_cfg and "search.concurrency" not in overrides:
        overrides["search.concurrency"] = evaluator_cfg["concurrency"]
    overrides["search.traces"] = _recorded_traces(started)  # whatever the TOML says now
    if args.meta_model and "search.meta_model" not in overrides:
        overrides["search.meta_model"] = args.meta_model  # not recorded before: record it now
    problem = load_problem(args.problem, overrides=overrides)
    mismatch = _problem_mismatch(problem, started)
    if mismatch is not None:
        raise CliUsageError(
            f"cannot resume run {args.resume} with another problem than it was started with: "
            f"{mismatch}; name the run's own problem, unchanged"
        )
    if changed:
        raise CliUsageError(
            f"cannot resume run {args.resume} with other options than it was started with: "
            f"{', '.join(changed)}; resume it without them (it keeps its own, so it ends as "
            "the uninterrupted run would), or start a new search with them"
        )
    journal = RunJournal.resume(path)
    try:
        fields = strategy_config_class(started.strategy).model_fields
        config = {
            k: v for k, v in started.config.items() if k not in _NOT_STRATEGY_KEYS and k in fields
        }
        budget = Budget.model_validate(started.config.get("budget") or {})
        model = args.meta_model or problem.search.meta_model
        n_test = started.config.get("n_test")
        if state.finished is not None:
            out.note(f"run {args.resume} had ended ({state.finished.status}); continuing it")
        else:
            out.note(f"resuming run {args.resume} after {state.n_events} recorded events")
        setup = _SearchSetup(
            problem=problem,
            strategy=started.strategy,
            seed=started.seed,
            config=config,
            budget=budget,
            model=model,
            use_test_split=bool(n_test),
            run_id=args.resume,
            journal=journal,
            resumed=True,
            # the recorded size: a demo's short test stays short, a full one full
            test_size=int(n_test) if n_test else None,
        )
        setup.problem_ref = str(args.problem)
        return setup
    except BaseException:
        journal.close()
        raise


def resume_setup(problem: str, run_id: str, db: Path) -> _SearchSetup:
    """The setup of `topology-studio search PROBLEM --resume RUN --db DB` with no other
    option (the studio's Resume button): every check of `_resume_setup`, the journal opened
    for appending; its notes are not printed.

    Raises:
        CliUsageError: as `_resume_setup` (its message is the line the CLI prints).
    """
    args = argparse.Namespace(
        problem=problem,
        resume=run_id,
        strategy=None,
        seed=None,
        max_evaluations=None,
        max_usd=None,
        max_wall_s=None,
        patience=None,
        generations=None,
        minibatch_size=None,
        example_timeout_s=None,
        no_test=False,
        meta_model=None,
        traces=False,
        overrides=[],
        time_scale=None,
        concurrency=None,
        max_nodes=None,
    )
    sink = io.StringIO()
    setup = _resume_setup(args, db, Output(stdout=sink, stderr=sink, rich_output=False))
    setup.db = db
    return setup


def run_cli_search(setup: _SearchSetup, out: Output) -> OptimizationResult:
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
        raise CliUsageError(f"invalid search option {_first_error(exc)}") from exc
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


def _call_cache(setup: _SearchSetup) -> DuckDBCallCache | None:
    """The search's call cache: `<db>.calls.duckdb`, namespaced by the problem's name and
    config hash; None with `--no-call-cache`."""
    if setup.db is None or not setup.use_call_cache:
        return None
    problem = setup.problem
    return DuckDBCallCache(call_cache_path(setup.db), f"{problem.name}:{problem.config_hash}")


def _check_store(db: Path) -> None:
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


def _resume_hint(setup: _SearchSetup, db: Path) -> str:
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


def _drop_if_empty(setup: _SearchSetup) -> bool:
    """Remove a new run's journal that recorded nothing (the run never started); True if so."""
    path = setup.journal.path
    if setup.resumed or not path.is_file() or path.stat().st_size > 0:
        return False
    path.unlink()
    return True


def _run_and_report(setup: _SearchSetup, db: Path, out: Output) -> int:
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
    _check_store(db)
    setup = _resume_setup(args, db, out) if args.resume else _new_setup(args, db)
    setup.db = db
    setup.all_objectives = getattr(args, "objectives", "accuracy-cost") == "all"
    setup.use_call_cache = not getattr(args, "no_call_cache", False)
    setup.executor = make_executor(args, setup.problem)
    setup.rate_limits = effective_rate_limits(setup.problem, args)
    if setup.note:
        out.line(setup.note)
    code = _run_and_report(setup, db, out)
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


def _phase_two_hint(setup: _SearchSetup, db: Path) -> str:
    return (
        f"interrupted in phase 2: the search run {setup.run_id} is recorded and so is every "
        f"call phase 2 made; continue with 'topology-studio search {setup.problem_ref} "
        f"--resume {setup.run_id} --db {db}'"
    )


def demo_data(out: Output) -> Problem:
    """The demo's data step: load `DEMO_PROBLEM` and print what was found.

    Loading checks every file's sha256 and copies a file found in `$TOPOLOGY_STUDIO_DATASETS`
    into the cache (`core.problems.datasets`), so every later command finds the data with the
    variable unset.

    Raises:
        DatasetError: a file is missing everywhere or fails its checksum.
    """
    out.heading("Data")
    problem = load_problem(
        DEMO_PROBLEM, overrides={"gold.validation_size": DEMO_BUDGET["validation_size"]}
    )
    sizes = ", ".join(f"{k} {len(v)}" for k, v in problem.splits.items())
    cache = default_cache_root() / "datasets"
    out.line(f"{problem.name}: OK ({sizes} examples; checksums verified; cached in {cache})")
    test = len(problem.splits.get("test", []))
    out.line(
        f"the demo's short search: validation {len(problem.splits['validation'])}, held-out test "
        f"{min(test, DEMO_BUDGET['test_size'])} of {test} (the full search below uses the "
        "problem's own splits)"
    )
    out.line(f"seed topology: {structure_line(problem.seed_spec)}")
    return problem


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    """`demo [--no-ui]`: check the data, run a short offline search, open the studio."""
    db = resolve_db_path(args.db)
    _check_store(db)
    problem = demo_data(out)
    budget = problem.search
    run_id = new_run_id()
    setup = _SearchSetup(
        problem=problem,
        strategy="evolutionary",
        seed=args.seed,
        config={"minibatch_size": DEMO_BUDGET["minibatch_size"]},
        budget=Budget(
            max_evaluations=DEMO_BUDGET["max_evaluations"],
            max_usd=budget.max_usd,
            max_wall_s=budget.max_wall_time_s,
        ),
        model=None,
        use_test_split=True,
        run_id=run_id,
        journal=_create_journal(db, run_id),
        resumed=False,
        test_size=DEMO_BUDGET["test_size"],
    )
    out.heading("Short search")
    code = _run_and_report(setup, db, out)
    if code == ExitCode.OK:
        # a 10-evaluation demo rarely beats the seed: say how to run the real thing
        n = problem.search.max_evaluations
        out.kv(
            [
                (
                    "full search",
                    f"topology-studio search {DEMO_PROBLEM} --seed {args.seed} --db {db}   "
                    f"({n} candidates, 1-3 minutes on 2 cores: finds ensembles and cascades)",
                )
            ]
        )
    if code != ExitCode.OK or args.no_ui:
        return code
    return launch_studio(db, out, port=args.port)


# ---- evaluate -------------------------------------------------------------------------------


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
    problem = load_problem(args.problem, overrides=_problem_overrides(args))
    spec = _read_spec(args.spec)
    executor = make_executor(args, problem)
    limits = effective_rate_limits(problem, args) if executor is None else {}
    # the problem's blank test, prices and latency source
    evaluator = problem.evaluator(
        executor=executor, rate_budget=RateBudget(limits) if limits else None
    )
    try:
        return _evaluate_splits(args, problem, spec, evaluator, out)
    finally:
        if executor is not None:
            executor.close()


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
