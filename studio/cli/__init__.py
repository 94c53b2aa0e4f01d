"""The `topology-studio` command line.

```
topology-studio search PROBLEM [--strategy evolutionary|meta-agent|random] [budget options]
                               [--meta-model provider:model] [--seed N] [--db PATH] [--resume RUN]
topology-studio evaluate PROBLEM SPEC.json [--split validation|test|all] [--limit N]
topology-studio runs | show RUN | diff RUN CANDIDATE
topology-studio apply RUN CANDIDATE [--to PATH] [--phase 2 [--only topology|prompts]] [--yes]
topology-studio studio [--port N] | demo [--no-ui]
topology-studio store rebuild [--force]
topology-studio solve "GOAL" --planner provider:model|demo [--model M] | roster
topology-studio library RUN --out LIB.json | serve-topology PROBLEM --library LIB.json [--requests FILE|-]
topology-studio init NAME --gold FILE.jsonl [--agent NAME=MODEL ...] [--replay FILE.jsonl] [--price NAME=IN:OUT]
```

Results go to stdout (rich tables on a terminal, plain two-space columns otherwise, so scripts
and tests can read them); progress bars and notes go to stderr (bars only on a terminal).

Errors: every `core.errors.TopologyStudioError` and every argument error is one line on stderr,
`topology-studio: error: ...`, and exit code 2; a search that ran and failed exits 1; Ctrl-C
exits 130 (a first Ctrl-C stops a search cleanly, records and prints it, then exits 130; a
second one stops it at once, records it as stopped and prints only the error line and how to
resume; the same in every phase: the seed's evaluation, the generations, the final re-scoring
and the held-out test, and also when the command was started with SIGINT ignored, `nohup` or
`&` in a script, since it takes SIGINT back). An example run with no output within
`--example-timeout-s` (the problem's `[evaluation] example_timeout_s`, default 300 s) is an error
`example_timeout: timed out after S s`; `--max-wall-s` cuts an evaluation still running at the
limit, and the run stops resumable. No traceback is ever printed unless `--debug` is given, before or after the command
(then the error's traceback follows its line). The database is `--db`, else
`$TOPOLOGY_STUDIO_DB`, else `data/runs.duckdb` in the current directory.

Damaged, read-only and full stores: `runs` and `show` on a database that cannot be written (a
read-only mount) answer from a read-only copy of it and its run journals, and say so. A damaged
database is one error line naming the file and `store rebuild`, which keeps the damaged file
as `<db>.damaged-<time>` and restores every run from the journals (not proposals, approvals or
the editor's saved versions, which lived only in the database); `search` refuses a damaged
database before it starts. A full disk stops a search with one line naming the journal and the
`search --resume` command: everything journaled is kept, and the resumed run ends with the
same front.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from core.errors import TopologyStudioError, is_query_interrupt
from studio.cli._common import DB_ENV, CliInterrupted, CliUsageError, ExitCode
from studio.cli._executor import add_executor_args
from studio.cli._output import Output

__all__ = ["build_parser", "main"]

PROG = "topology-studio"


class _Parser(argparse.ArgumentParser):
    """argparse, but an argument error is an exception (one line later), never `sys.exit`."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix(PROG).strip()
        prefix = f"{where}: " if where else ""
        raise CliUsageError(f"{prefix}{message} (see '{self.prog} --help')")


def _positive_or_zero_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1-65535, got {value}")
    return value


_DEBUG_HELP = "print the traceback of an error after its one-line message"


def _add_debug(p: argparse.ArgumentParser) -> None:
    """`--debug` after the command too (`topology-studio search ... --debug`); SUPPRESS keeps
    the command's parser from resetting a `--debug` given before the command."""
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="PATH",
        help=f"the run database (default: ${DB_ENV}, else data/runs.duckdb here)",
    )


def _add_problem_overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a field of the problem's TOML, e.g. --set gold.validation_size=50 "
        "(VALUE is read as TOML: numbers, true/false, quoted strings; else taken as text)",
    )
    p.add_argument(
        "--time-scale",
        type=_non_negative_float,
        metavar="X",
        help="multiplier on replayed model latency before it is slept (0 = no sleep)",
    )


def _add_example_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--example-timeout-s",
        type=_positive_float,
        metavar="S",
        help="deadline of one example run, seconds (default: the problem's [evaluation] "
        "example_timeout_s, else 300); a run with no output by then is an error 'timed out "
        "after S s', never a hang",
    )


def _add_budget(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("budget (defaults: the problem's [search] table)")
    g.add_argument(
        "--max-evaluations",
        type=_positive_int,
        metavar="N",
        help="candidate evaluations, the seed's included (at least 1)",
    )
    g.add_argument(
        "--max-usd",
        type=_positive_float,
        metavar="USD",
        help="priced model usage of the whole run, USD (above 0)",
    )
    g.add_argument(
        "--max-wall-s",
        type=_positive_float,
        metavar="S",
        help="wall-clock seconds (above 0); an evaluation still running at the limit is cut "
        "short and the run stops, resumable",
    )
    g.add_argument(
        "--patience",
        type=_positive_int,
        metavar="N",
        help="evaluations in a row without a new best before stopping",
    )
    g.add_argument(
        "--generations",
        type=_positive_int,
        metavar="N",
        help="generations to run (default: until the budget stops the run)",
    )
    g.add_argument(
        "--minibatch-size",
        type=_positive_int,
        metavar="N",
        help="validation examples per candidate evaluation during the search",
    )
    g.add_argument(
        "--concurrency", type=_positive_int, metavar="N", help="examples evaluated at once"
    )
    _add_workers(g)


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least 1 or 'auto', not {text!r}"
        ) from None


def _add_workers(p: Any) -> None:
    add_executor_args(p)
    p.add_argument(
        "--workers",
        type=_workers,
        metavar="N",
        help="processes that share each evaluation's examples (forked, Linux; 'auto': one per "
        "CPU; identical results); default: the problem's [search] workers (gsm8k_replay: auto)",
    )


def _add_objectives(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--objectives",
        choices=("accuracy-cost", "all"),
        default="accuracy-cost",
        help="the printed front: over accuracy and cost (default; a line says how many more "
        "candidates the full front holds), or over all five objectives (accuracy, cost, "
        "latency, n_agents, depth)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for `--help` tests and docs)."""
    parser = _Parser(
        prog=PROG,
        description="Search for how LLM agents should be composed, and look at the results.",
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    parser.add_argument(
        "--db",
        dest="db_global",
        metavar="PATH",
        help="the run database, for every command (same as the command's --db)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("search", help="run a topology search and record it")
    p.add_argument(
        "problem",
        nargs="?",
        metavar="PROBLEM",
        help="a problem name (e.g. gsm8k_replay), directory or problem.toml",
    )
    p.add_argument(
        "--strategy",
        choices=("evolutionary", "exhaustive", "meta-agent", "random"),
        help="default: the problem's [search] strategy",
    )
    p.add_argument(
        "--max-nodes",
        type=_positive_int,
        metavar="N",
        help="exhaustive only: every topology of at most N nodes (default 5); its count is "
        "printed first, and without --max-evaluations the budget is that count + 1",
    )
    p.add_argument(
        "--meta-model",
        metavar="PROVIDER:MODEL",
        help="the meta agent's model, e.g. openai:gpt-4o (meta-agent only)",
    )
    p.add_argument("--seed", type=int, metavar="N", help="random seed (default: the problem's)")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue the interrupted run RUN of PROBLEM (give it: a journal never chooses the "
        "problem to load; another problem, or changed problem files, is refused) with its "
        "recorded options (other values are refused, except --concurrency, --workers and --time-scale)",
    )
    p.add_argument(
        "--no-test",
        action="store_true",
        help="skip the held-out test evaluation of the validation front",
    )
    # the new run's id, chosen by `sweep` so it can name each search as it starts
    p.add_argument("--run-id", help=argparse.SUPPRESS)
    from studio.cli._prompts import add_prompt_arguments

    add_prompt_arguments(p)
    p.add_argument(
        "--traces",
        action="store_true",
        help="record every example's trace (spans) in the run journal, for the studio's "
        "drill-down; off by default (the journal is about ten times smaller), the problem's "
        "[search] traces = true turns it on; a resumed run keeps what it recorded",
    )
    p.add_argument(
        "--no-call-cache",
        action="store_true",
        help="do not answer agent calls from the call cache (<db>.calls.duckdb, on by default: "
        "a call made before, same agent, prompt and trial, is not made again, and is still "
        "charged its recorded cost)",
    )
    _add_budget(p)
    _add_example_timeout(p)
    _add_problem_overrides(p)
    _add_objectives(p)
    _add_db(p)

    p = sub.add_parser("evaluate", help="evaluate one topology, with per-example results")
    p.add_argument("problem", metavar="PROBLEM")
    p.add_argument("spec", metavar="SPEC.json", help="a topology spec file ('-' reads stdin)")
    p.add_argument("--split", choices=("validation", "test", "all"), default="validation")
    p.add_argument(
        "--limit",
        type=_positive_int,
        metavar="N",
        help="only the first N examples of the split (at least 1)",
    )
    p.add_argument(
        "--concurrency", type=_positive_int, metavar="N", help="examples evaluated at once"
    )
    _add_workers(p)
    _add_example_timeout(p)
    _add_problem_overrides(p)

    p = sub.add_parser(
        "sweep", help="searches over strategies x seeds, run concurrently, as one named group"
    )
    p.add_argument("problem", metavar="PROBLEM", help="a problem name or directory")
    p.add_argument("--strategies", required=True, metavar="A,B", help="e.g. evolutionary,random")
    p.add_argument("--seeds", required=True, metavar="SEEDS", help="e.g. 1-5 or 1,3,7")
    p.add_argument("--name", metavar="NAME", help="the group's name (default: sweep-<time>)")
    p.add_argument(
        "--parallel", type=_positive_int, default=2, metavar="N", help="searches at once (2)"
    )
    p.add_argument("--max-evaluations", type=_positive_int, metavar="N")
    p.add_argument("--no-test", action="store_true", help="skip each winner's test evaluation")
    _add_db(p)
    add_executor_args(p)

    p = sub.add_parser("runs", help="list the recorded runs")
    _add_db(p)

    p = sub.add_parser("show", help="one run: summary, Pareto front and best topology")
    p.add_argument("run", metavar="RUN", help="a run id (a unique prefix is enough)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the run as one JSON document (summary, archive, validation front, test "
        "front, best candidate; keys documented in studio/cli/results.py)",
    )
    _add_objectives(p)
    _add_db(p)

    p = sub.add_parser(
        "export", help="write a run's archive, fronts and per-example results to files"
    )
    p.add_argument("run", metavar="RUN", help="a run id (a unique prefix is enough)")
    p.add_argument(
        "--format",
        default="csv",
        metavar="FORMAT",
        help="csv (default), json or parquet: one file per table",
    )
    p.add_argument(
        "--out", metavar="DIR", help="the folder to write to (default: here; created if missing)"
    )
    p.add_argument(
        "--replay",
        metavar="DIR",
        help="write a replay problem from the run's recorded calls instead (needs --problem; "
        "docs/real-providers.md)",
    )
    p.add_argument("--problem", metavar="PROBLEM", help="--replay: the problem the run searched")
    p.add_argument("--force", action="store_true", help="--replay: replace DIR's problem files")
    _add_db(p)

    p = sub.add_parser("diff", help="a candidate against the run's seed (or another)")
    p.add_argument("run", metavar="RUN")
    p.add_argument("candidate", type=_positive_or_zero_int, metavar="CANDIDATE")
    p.add_argument(
        "--against",
        type=_positive_or_zero_int,
        metavar="CANDIDATE",
        default=0,
        help="the candidate to compare with (default 0, the seed)",
    )
    _add_db(p)

    p = sub.add_parser(
        "apply", help="write a candidate to a topology registry (dry run unless --yes)"
    )
    p.add_argument("run", metavar="RUN")
    p.add_argument("candidate", type=_positive_or_zero_int, metavar="CANDIDATE")
    p.add_argument(
        "--to",
        metavar="PATH",
        help="a topology registry directory, created if missing (default: the studio's registry: "
        "$TOPOLOGY_STUDIO_REGISTRY, else topologies/ beside the run database)",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="the topology's name in the registry (default: the run's problem)",
    )
    p.add_argument(
        "--phase",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: CANDIDATE is a prompt candidate of RUN's phase 2 (search --then-prompts); "
        "default 1, a candidate of its topology search",
    )
    p.add_argument(
        "--only",
        choices=("topology", "prompts"),
        help="a phase-2 (prompt) candidate: write only its topology part (the search's winner) or "
        "only its prompt part (the evolved prompts into the registry's current topology); "
        "default both",
    )
    p.add_argument("--yes", action="store_true", help="write it (otherwise only show the diff)")
    p.add_argument("--by", metavar="WHO", help="who approves (default: the login name)")
    p.add_argument("--comment", default="", metavar="TEXT", help="why (recorded)")
    _add_db(p)

    p = sub.add_parser("store", help="look after the run database: rebuild it from its journals")
    store_sub = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=_Parser)
    p = store_sub.add_parser(
        "rebuild",
        help="a damaged database restored from its run journals (the damaged file is kept "
        "aside as <db>.damaged-<time>; proposals and approvals are not restored)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild even a database that opens and reads fine (drops its proposals, "
        "approvals and saved topology versions)",
    )
    _add_db(p)
    _add_debug(p)

    p = sub.add_parser(
        "solve", help="solve a goal with the meta orchestrator (agents spawned per subtask)"
    )
    p.add_argument("goal", metavar="GOAL", help="what to achieve, in words")
    p.add_argument(
        "--planner",
        required=True,
        metavar="PROVIDER:MODEL",
        help="the planner's model (e.g. openai:gpt-4.1), or demo for a scripted offline planner",
    )
    p.add_argument(
        "--model", metavar="PROVIDER:MODEL", help="the specialists' model (default: the planner's)"
    )
    p.add_argument("--max-subtasks", type=_positive_int, default=10, metavar="N")
    p.add_argument("--max-spawn-depth", type=_positive_int, default=3, metavar="N")
    p.add_argument(
        "--no-memory", action="store_true", help="do not read or write the roster in --db"
    )
    _add_db(p)

    p = sub.add_parser("roster", help="the specialists solve has persisted")
    _add_db(p)

    p = sub.add_parser("studio", help="start the web studio on 127.0.0.1")
    p.add_argument("--port", type=_port, help="default: 8501 if free, else a free port")
    _add_db(p)

    p = sub.add_parser(
        "demo", help="check the data, run a short offline search on gsm8k_replay, open the studio"
    )
    p.add_argument("--no-ui", action="store_true", help="do not start the studio")
    p.add_argument("--port", type=_port)
    p.add_argument("--seed", type=int, metavar="N", default=1)
    _add_db(p)
    from studio.cli.library import add_parsers as add_library_parsers

    add_library_parsers(
        sub,
        add_db=_add_db,
        add_problem_overrides=_add_problem_overrides,
        positive_int=_positive_int,
    )
    from studio.cli.init import add_parser as add_init_parser

    add_init_parser(sub)
    for command in sub.choices.values():
        _add_debug(command)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("topology-studio")
    except Exception:  # noqa: BLE001 (not installed: a source checkout)
        return "0+unknown"


def _handler(
    command: str, *, json_output: bool = False
) -> Callable[[argparse.Namespace, Output], int]:
    """The command's function, from its own module (imported only when it runs)."""
    if command == "search":
        from studio.cli.search import cmd_search

        return cmd_search
    if command == "demo":
        from studio.cli.demo import cmd_demo

        return cmd_demo
    if command == "evaluate":
        from studio.cli.evaluate import cmd_evaluate

        return cmd_evaluate
    if command == "export" or (command == "show" and json_output):
        from studio.cli.results import cmd_export, cmd_show_json

        return cmd_export if command == "export" else cmd_show_json
    if command in ("runs", "show", "diff", "apply"):
        from studio.cli.runs import cmd_apply, cmd_diff, cmd_runs, cmd_show

        return {"runs": cmd_runs, "show": cmd_show, "diff": cmd_diff, "apply": cmd_apply}[command]
    if command in ("solve", "roster"):
        from studio.cli.solve import cmd_roster, cmd_solve

        return cmd_solve if command == "solve" else cmd_roster
    if command in ("library", "serve-topology"):
        from studio.cli.library import cmd_library, cmd_serve_topology

        return cmd_library if command == "library" else cmd_serve_topology
    if command == "sweep":
        from studio.cli.sweep import cmd_sweep

        return cmd_sweep
    if command == "init":
        from studio.cli.init import cmd_init

        return cmd_init
    if command == "store":
        from studio.cli.store import cmd_store_rebuild

        return cmd_store_rebuild
    from studio.cli.studio import cmd_studio

    return cmd_studio


def _take_back_sigint() -> None:
    """Restore Python's SIGINT handler when the command was started with SIGINT ignored
    (`nohup`, `command &` in a script, some CI runners): a Ctrl-C or a supervisor's SIGINT
    must still stop a search cleanly (asyncio installs its own handler only over Python's),
    and the studio's child must not inherit the ignored disposition. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it).

    Exit codes: 0 success; 1 a search or evaluation that ran and failed, or an unexpected
    internal error; 2 a bad input (argument, problem, dataset, spec, budget, store); 130 Ctrl-C.
    Run as a program (`argv` None), it first takes back a SIGINT it was started with ignored.
    """
    if argv is None:
        _take_back_sigint()
    args_list = list(sys.argv[1:] if argv is None else argv)
    # the CLI owns the terminal (progress bar, tables): pydantic-ai's first-run banner would
    # land in the middle of the progress bar (it reads this variable when it would show)
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")
    debug = False
    out = Output()
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        debug = bool(getattr(args, "debug", False))
        if args.command is None:
            parser.print_help(out.stdout)
            return ExitCode.USAGE
        if args.command == "store" and args.store_command is None:
            raise CliUsageError(
                "store: give an ACTION: rebuild (see 'topology-studio store --help')"
            )
        if args.command == "search" and args.problem is None and args.resume is None:
            raise CliUsageError("search: give a PROBLEM (and --resume RUN to continue a run of it)")
        if getattr(args, "db", None) is None and args.db_global is not None:
            args.db = args.db_global
        return _handler(args.command, json_output=bool(getattr(args, "json", False)))(args, out)
    except CliUsageError as exc:
        out.error(str(exc))
        return ExitCode.USAGE
    except TopologyStudioError as exc:
        out.error(str(exc))
        if debug:
            traceback.print_exc(file=out.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt as exc:
        out.error("interrupted")
        if isinstance(exc, CliInterrupted):
            out.note(exc.hint)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK
    except SystemExit as exc:  # --help and --version print, then exit through argparse
        return exc.code if isinstance(exc.code, int) else ExitCode.OK
    except Exception as exc:  # noqa: BLE001 (never a traceback without --debug)
        if is_query_interrupt(exc):
            out.error("interrupted")  # a Ctrl-C that reached a DuckDB query
            return ExitCode.INTERRUPTED
        return _internal_error(exc, out, debug=debug)


def _internal_error(exc: BaseException, out: Output, *, debug: bool) -> int:
    """Report an unexpected error in one line (the traceback with `--debug`); exit code 1."""
    out.error(
        f"internal error: {type(exc).__name__}: {exc} (run the command again with --debug "
        "for the traceback)"
    )
    if debug:
        traceback.print_exception(exc, file=out.stderr)
    return ExitCode.FAILED
