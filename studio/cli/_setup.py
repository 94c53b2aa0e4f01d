"""A search's setup, from the command line (a new run) or from a recorded run (`--resume`).

A new run takes the problem's `[search]` table with the flags over it. `search PROBLEM --resume
RUN` continues the run with the options it was started with; an option that differs from them
is refused (a different budget, seed or strategy would not continue the same run), except those
that change only how fast it runs (`--concurrency`, `--time-scale`, `--workers`). The problem is
always the one given on the command line, never one the journal names (a journal is data: it
never chooses the code that is loaded); it must be the recorded problem, same name and same
files hash (`Problem.files_sha256`), else it is refused.
"""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from core.agents.rate_budget import ProviderLimit
from core.errors import BudgetError
from core.evaluation.executor import Executor
from core.problems import Problem, load_problem
from core.search.budget import Budget
from core.search.engine import build_search
from core.search.events import RunStarted
from core.search.result import OptimizationResult
from core.search.strategies import strategy_config_class
from core.storage import ResumeState, RunJournal, journal_path, new_run_id, read_journal
from studio.cli._common import CliUsageError, parse_overrides
from studio.cli._output import Output

__all__ = [
    "SearchSetup",
    "create_journal",
    "first_error",
    "new_setup",
    "problem_overrides",
    "recorded_setup",
    "resume_setup",
]

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


def problem_overrides(args: argparse.Namespace) -> dict[str, Any]:
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
        raise CliUsageError(f"invalid search option {first_error(exc)}") from exc
    space = build_search(problem, "exhaustive", config=config).space
    found = enumerate_topologies(MutationContext.from_space(space), cfg.max_nodes, cfg)
    if not given:
        budget = budget.model_copy(update={"max_evaluations": found.count + 1})
    return budget, found.summary()


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


class SearchSetup:
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


def create_journal(db: Path, run_id: str) -> RunJournal:
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


def new_setup(args: argparse.Namespace, db: Path) -> SearchSetup:
    problem = load_problem(args.problem, overrides=problem_overrides(args))
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
    journal = create_journal(db, run_id)
    setup = SearchSetup(
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


def recorded_setup(args: argparse.Namespace, db: Path, out: Output) -> SearchSetup:
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
        setup = SearchSetup(
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


def resume_setup(problem: str, run_id: str, db: Path) -> SearchSetup:
    """The setup of `topology-studio search PROBLEM --resume RUN --db DB` with no other
    option (the studio's Resume button): every check of `recorded_setup`, the journal opened
    for appending; its notes are not printed.

    Raises:
        CliUsageError: as `recorded_setup` (its message is the line the CLI prints).
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
    setup = recorded_setup(args, db, Output(stdout=sink, stderr=sink, rich_output=False))
    setup.db = db
    return setup
