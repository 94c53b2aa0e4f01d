"""`library RUN --out lib.json` and `serve-topology PROBLEM --library lib.json`: runtime topology
design from the shell, with no model key.

`library` writes the run's validated Pareto front (`core.runtime_design.seed_library_from_run`)
as a library file and prints its entries.

`serve-topology` serves requests (`--library` a library file, or a run id of `--db`: its
validated front), one JSON object per line from `--requests FILE` or standard
input (`-`, the default): `{"question": "...", "budget_usd": 0.01, "latency_ms": 2000}` (the
limits optional, per request; USD and ms per request). For each, a `LibraryDesigner` over the
library picks a topology (the cache first: `InMemoryLRU(--cache-size)` on the normalised
question, so a repeated question reuses what served it), the problem's evaluator runs it on
the question (the gold example with that exact question text when the problem has one, so the
answer is scored; else the bare question, unscored), and the outcome is stored back into the
cache (a run with status ok is a success; an error, a blank or an invalid run decays the
entry). Requests are read and served one line at a time (on a terminal each is said on stderr as it is
served). One line per request on stdout: line number, spec hash (12 hex), library entry, cache
hit, answer, correct (1/0, `-` unscored), cost USD, latency ms, status. The totals follow: hit
rate, and served accuracy (over the scored requests), cost (USD, in total) and latency (ms, the
mean over the requests that ran ok) against running the library's best single topology (its
best measured accuracy: `LibraryDesigner.choose()`) on the same requests. Ctrl-C prints the
requests served so far and their totals, then exits 130.

With `--designer-model MODEL` (a pydantic-ai model id, e.g. `openai-chat:gpt-4o-mini`) a
`RuntimeTopologyDesigner` on that model designs each request the cache does not answer: the
library is its seed library (with its figures), the request's limits are told to it, the
problem's registries check its design, and the library's best entry is its fallback (a design
that failed, e.g. a provider that kept failing, is served by that entry, said on stderr with
the provider's line, and not cached). The model is checked before any request (it must build
and be priced), and is called through the problem's `[models]` fault rule and base URL like
every other model. Its own requests, tokens and USD (genai-prices, or the problem's price
table) are a `designer` line of the totals, apart from the served topologies' cost.

A bad line (not JSON, not an object, no question, a bad limit, an unknown field) is one
`topology-studio: error: requests line N: ...` line on stderr; the other lines are still served,
and the exit code is then 2 (else 0).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from core.agents.providers import apply_base_url, use_policy
from core.errors import ProviderError
from studio.cli._common import CliInterrupted, CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output, fmt_float

if TYPE_CHECKING:
    from core.evaluation import TopologyEvaluator
    from core.evaluation.metrics import GoldExample
    from core.evaluation.pricing import Pricer
    from core.problems import Problem
    from core.runtime.tracing import ModelUsage
    from core.runtime_design.designer import RuntimeTopologyDesigner
    from core.runtime_design.library import LibraryDesigner

__all__ = [
    "REQUEST_FIELDS",
    "Request",
    "ServeReport",
    "Served",
    "add_parsers",
    "cmd_library",
    "cmd_serve_topology",
    "iter_requests",
    "parse_request",
    "serve_requests",
]

REQUEST_FIELDS = ("question", "budget_usd", "latency_ms")
"""The fields of a request line."""

_ANSWER = re.compile(r'^\{"answer":("(?:[^"\\]|\\.)*"|[^,}"]+)')


def add_parsers(
    sub: Any,
    *,
    add_db: Callable[[argparse.ArgumentParser], None],
    add_problem_overrides: Callable[[argparse.ArgumentParser], None],
    positive_int: Callable[[str], int],
) -> None:
    """Register `library` and `serve-topology` on the command line's subparsers."""
    p = sub.add_parser("library", help="write a run's validated front as a seed library file")
    p.add_argument("run", metavar="RUN", help="a run id (a unique prefix is enough)")
    p.add_argument("--out", required=True, metavar="LIB.json", help="the library file to write")
    add_db(p)

    p = sub.add_parser(
        "serve-topology",
        help="serve JSON-line requests with topologies picked from a seed library (no model)",
    )
    p.add_argument("problem", metavar="PROBLEM")
    p.add_argument(
        "--library",
        required=True,
        metavar="LIB.json|RUN",
        help="a file written by 'library RUN', or a run id of --db (its validated front)",
    )
    p.add_argument(
        "--requests",
        default="-",
        metavar="FILE",
        help='JSON lines {"question": ..., "budget_usd": ..., "latency_ms": ...} '
        "(default '-': standard input)",
    )
    p.add_argument(
        "--cache-size",
        type=positive_int,
        default=1000,
        metavar="N",
        help="questions the topology cache keeps (default 1000)",
    )
    p.add_argument(
        "--designer-model",
        default=None,
        metavar="MODEL",
        help="design each request with this pydantic-ai model (e.g. openai-chat:gpt-4o-mini), "
        "the library as its seed and its best entry as the fallback; default: pick from the "
        "library by its rule, no model",
    )
    add_problem_overrides(p)
    add_db(p)


# ---- library ----------------------------------------------------------------------------------


def cmd_library(args: argparse.Namespace, out: Output) -> int:
    """`library RUN --out LIB.json`: the run's validated front as a library file."""
    from core.ir import spec_hash
    from core.runtime_design.seed import library_to_json, seed_library_from_run
    from studio.cli.runs import resolve_run_id
    from studio.cli.store import open_cli_store

    with open_cli_store(resolve_db_path(args.db), out) as store:
        run_id = resolve_run_id(store, args.run)
        entries = seed_library_from_run(store, run_id)
    target = Path(args.out).expanduser()
    try:
        target.write_text(library_to_json(entries, run_id=run_id), encoding="utf-8")
    except OSError as exc:
        raise CliUsageError(f"cannot write the library {target}: {exc.strerror or exc}") from exc
    out.table(
        ("entry", "label", "spec", "accuracy", "cost_usd", "latency_ms"),
        [
            (
                str(i),
                e.label or "-",
                spec_hash(e.spec)[:12],
                fmt_float(e.accuracy, 4),
                fmt_float(e.cost_usd, 6),
                fmt_float(e.latency_ms, 1),
            )
            for i, e in enumerate(entries, start=1)
        ],
        right=("entry", "accuracy", "cost_usd", "latency_ms"),
    )
    out.line(
        f"(run {run_id}: {len(entries)} entries of its validation front; per problem: accuracy "
        "= share correct, cost_usd in USD, latency_ms in ms)"
    )
    out.kv([("library", str(target))])
    return ExitCode.OK


# ---- serve-topology -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request line: the question and its optional limits (USD, ms per request)."""

    line: int
    question: str
    budget_usd: float | None = None
    latency_ms: float | None = None


def _limit(item: dict[str, Any], name: str) -> float | None:
    value = item.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {json.dumps(value)}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def parse_request(text: str, line: int) -> Request:
    """One request line as a `Request`.

    Raises:
        ValueError: not JSON, not an object, no non-empty string `question`, a limit that is
            not a finite number >= 0, or a field outside `REQUEST_FIELDS` (the message says
            which; the caller adds the line number).
    """
    try:
        item: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(item, dict):
        raise ValueError(f"expected a JSON object, got {type(item).__name__}")
    fields: dict[str, Any] = item  # pyright: ignore[reportUnknownVariableType]
    unknown = sorted(k for k in fields if k not in REQUEST_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown field(s) {', '.join(unknown)} (a request has {', '.join(REQUEST_FIELDS)})"
        )
    question = fields.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError('"question" must be a non-empty string')
    return Request(line, question, _limit(fields, "budget_usd"), _limit(fields, "latency_ms"))


@dataclass(frozen=True)
class Served:
    """One request served: what was chosen, how it ran, and what choosing cost in time."""

    request: Request
    spec_hash: str
    entry: int | None
    """1-based library entry of the spec, None when the cache served a spec outside it."""
    cache_hit: bool
    reason: str
    answer: str
    status: str
    error: str | None
    accuracy: float | None
    """The score in [0, 1], None when the question matched no gold example (unscored)."""
    cost_usd: float
    latency_ms: float
    overhead_ms: float
    """Wall time of the design (cache lookup or the rule) plus the cache store, ms."""
    design_ms: float
    """Wall time of the design alone (cache lookup, else the rule), ms."""
    best_accuracy: float | None
    best_cost_usd: float
    best_latency_ms: float
    source: str = "designer"
    """Where the spec came from: `cache`, `designer` (the library's rule or the model) or
    `fallback` (the model designer failed: the library's best entry)."""
    design_error: str | None = None
    """Why the model designer failed (`source == "fallback"`), else None."""
    design_usage: tuple[ModelUsage, ...] = ()
    """The model designer's usage for this request (empty for a cache hit or the rule)."""
    design_cost_usd: float = 0.0
    """What that usage cost, USD (genai-prices or the problem's price table); not in
    `cost_usd`, which is the served topology's own."""


@dataclass
class ServeReport:
    """Every request served and the totals."""

    served: list[Served] = field(default_factory=list[Served])
    best_entry: int = 1
    """1-based library entry of the best single topology (the baseline)."""
    hits: int = 0
    lookups: int = 0
    designer_model: str | None = None
    """The model designer's `provider:model`, None when the library's rule chose."""

    @property
    def hit_rate(self) -> float:
        """Cache hits / requests served (0.0 for none)."""
        return self.hits / self.lookups if self.lookups else 0.0


def _answer(summary: str) -> str:
    match = _ANSWER.match(summary)
    if match is not None:
        value: Any = json.loads(match.group(1)) if match.group(1).startswith('"') else None
        return str(value) if value is not None else match.group(1)
    summary = " ".join(summary.split())
    return summary if len(summary) <= 40 else summary[:39] + "…"


def _question_of(example: GoldExample) -> str | None:
    value = example.input
    if isinstance(value, str):
        return value
    question = getattr(value, "question", None)
    return question if isinstance(question, str) else None


def gold_by_question(problem: Problem) -> dict[str, tuple[str, GoldExample]]:
    """Question text -> (split, gold example), over every split (the first example wins)."""
    found: dict[str, tuple[str, GoldExample]] = {}
    for split, examples in problem.splits.items():
        for example in examples:
            question = _question_of(example)
            if question is not None:
                found.setdefault(question, (split, example))
    return found


def _figures(result: Any, scored: bool) -> tuple[float | None, float, float]:
    """(accuracy, cost USD, latency ms) of one run: accuracy None when unscored, 0.0 for a
    scored run that did not give a finite score (rejected, invalid); NaN figures when the spec
    was rejected (nothing ran)."""
    if result is None:
        return (0.0 if scored else None), math.nan, math.nan
    accuracy: float | None = None
    if scored:
        accuracy = float(result.accuracy) if math.isfinite(result.accuracy) else 0.0
    return accuracy, float(result.cost_usd), float(result.latency_ms)


async def serve_requests(
    problem: Problem,
    designer: LibraryDesigner,
    requests: Iterable[Request],
    *,
    evaluator: TopologyEvaluator | None = None,
    on_served: Callable[[Served], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    model_designer: RuntimeTopologyDesigner | None = None,
    pricer: Pricer | None = None,
) -> ServeReport:
    """Serve each request with `designer` on `problem` (see the module docstring).

    Args:
        model_designer: designs each request instead of `designer`'s rule (sharing its cache;
            `designer` still gives the best single topology and the entry numbers). A fallback
            (its design failed) is served but never stored in the cache.
        pricer: prices the model designer's usage (None: `Pricer(problem.prices)`).

    Returns:
        The `ServeReport`; a run that failed is in it (its status and error), never raised.
    """
    from core.agents.usage import agent_model_name
    from core.evaluation.metrics import GoldExample
    from core.evaluation.pricing import Pricer
    from core.ir import spec_hash

    evaluator = evaluator if evaluator is not None else problem.evaluator()
    pricer = pricer if pricer is not None else Pricer(problem.prices)
    gold = gold_by_question(problem)
    best = designer.choose()
    report = ServeReport(best_entry=best.index + 1)
    if model_designer is not None:
        report.designer_model = agent_model_name(model_designer.designer_agent)
    chooser = model_designer if model_designer is not None else designer
    best_hash = spec_hash(best.entry.spec)

    async def run(spec: Any, request: Request) -> Any:
        matched = gold.get(request.question)
        if matched is not None:
            split, example = matched
        else:
            split, example = (
                "request",
                GoldExample(input=request.question, id=f"request-{request.line}"),
            )
        evaluation = await evaluator.evaluate(spec, [example], split=split)
        if evaluation.rejected:
            return None, evaluation.reason, matched is not None
        return evaluation.results[0], None, matched is not None

    for request in requests:
        start = clock()
        design = await chooser.design(
            request.question, budget_usd=request.budget_usd, latency_ms=request.latency_ms
        )
        chosen = clock()
        result, rejected, scored = await run(design.spec, request)
        ran = clock()
        ok = result is not None and result.status == "ok"
        if design.source != "fallback":  # a stand-in for a failed design is not remembered
            await designer.cache.store(request.question, design.spec, ok)
        stored = clock()
        usage = tuple(u for u in design.usage if u.requests or u.input_tokens)
        report.lookups += 1
        report.hits += design.source == "cache"
        digest = spec_hash(design.spec)
        if digest == best_hash:
            best_result = result
        else:
            best_result, _, _ = await run(best.entry.spec, request)
        entry = designer.entry_index(design.spec)

        accuracy, cost, latency = _figures(result, scored)
        b_accuracy, b_cost, b_latency = _figures(best_result, scored)
        served = Served(
            request=request,
            spec_hash=digest,
            entry=None if entry is None else entry + 1,
            cache_hit=design.source == "cache",
            reason=design.thought,
            answer="" if result is None else _answer(result.output_summary),
            status="rejected" if result is None else str(result.status),
            error=rejected if result is None else result.error,
            accuracy=accuracy,
            cost_usd=cost,
            latency_ms=latency,
            overhead_ms=((chosen - start) + (stored - ran)) * 1000.0,
            design_ms=(chosen - start) * 1000.0,
            best_accuracy=b_accuracy,
            best_cost_usd=b_cost,
            best_latency_ms=b_latency,
            source=design.source,
            design_error=design.error,
            design_usage=usage,
            design_cost_usd=pricer.total(usage).cost_usd if usage else 0.0,
        )
        report.served.append(served)
        if on_served is not None:
            on_served(served)
    return report


def iter_requests(lines: Iterable[str], on_error: Callable[[int, str], None]) -> Iterator[Request]:
    """The good requests of `lines`, read one line at a time, so each request is served as soon
    as its line arrives (a terminal or a pipe is not read to its end first); 1-based line
    numbers, blank lines skipped, each bad line reported as `on_error(line_number, why)`."""
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            request = parse_request(text, n)
        except ValueError as exc:
            on_error(n, str(exc))
            continue
        yield request


def read_requests(lines: Iterable[str], on_error: Callable[[int, str], None]) -> list[Request]:
    """`iter_requests` as a list."""
    return list(iter_requests(lines, on_error))


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else math.nan


def _open_requests(name: str) -> IO[str]:
    if name == "-":
        return sys.stdin
    try:
        return Path(name).expanduser().open(encoding="utf-8")
    except OSError as exc:
        raise CliUsageError(f"cannot read the requests {name}: {exc.strerror or exc}") from exc


def _row(s: Served) -> tuple[str, ...]:
    correct = "-" if s.accuracy is None else fmt_float(s.accuracy, 0)
    return (
        str(s.request.line),
        s.spec_hash[:12],
        "-" if s.entry is None else str(s.entry),
        "hit" if s.cache_hit else "miss",
        s.answer or "-",
        correct,
        fmt_float(s.cost_usd, 6),
        fmt_float(s.latency_ms, 1),
        s.status,
    )


HEADER = ("line", "spec", "entry", "cache", "answer", "correct", "cost_usd", "latency_ms", "status")


def print_totals(report: ServeReport, out: Output) -> None:
    """The totals of a serve (hit rate; served against the best single topology)."""
    served = report.served
    n = len(served)
    out.heading("Totals")
    if not served:
        out.kv([("requests", "0 (nothing served)")])
        return
    scored = [s for s in served if s.accuracy is not None]
    ran = [s for s in served if s.status == "ok"]
    acc = _mean([s.accuracy for s in scored if s.accuracy is not None])
    best_acc = _mean([s.best_accuracy for s in scored if s.best_accuracy is not None])

    def figures(accuracy: float, costs: Iterable[float], latencies: list[float]) -> str:
        total = math.fsum(c for c in costs if math.isfinite(c))
        return (
            f"accuracy {fmt_float(accuracy, 4)} over {len(scored)} scored, cost "
            f"${fmt_float(total, 6)} in total, latency {fmt_float(_mean(latencies), 1)} ms mean "
            f"over the {len(ran)} that ran ok"
        )

    out.kv(
        [
            ("requests", n),
            ("cache_hit_rate", f"{fmt_float(report.hit_rate, 4)} ({report.hits} of {n})"),
            ("scored", f"{len(scored)} (questions with a gold answer)"),
            (
                "served",
                figures(acc, (s.cost_usd for s in served), [s.latency_ms for s in ran]),
            ),
            (
                f"best_single (entry {report.best_entry})",
                figures(
                    best_acc, (s.best_cost_usd for s in served), [s.best_latency_ms for s in ran]
                ),
            ),
            (
                "overhead",
                f"{fmt_float(_mean([s.overhead_ms for s in served]), 3)} ms per request "
                "(design + cache)",
            ),
            *_designer_totals(report),
        ]
    )


def _designer_totals(report: ServeReport) -> list[tuple[str, str]]:
    """The model designer's own requests, tokens and USD (apart from the served cost) and its
    fallbacks, as `(key, value)` lines; none when the library's rule chose."""
    if report.designer_model is None:
        return []
    usage = [u for s in report.served for u in s.design_usage]
    requests = sum(u.requests for u in usage)
    tokens_in = sum(u.input_tokens for u in usage)
    tokens_out = sum(u.output_tokens for u in usage)
    cost = math.fsum(s.design_cost_usd for s in report.served)
    designed = sum(s.source != "cache" for s in report.served)
    fallbacks = sum(s.source == "fallback" for s in report.served)
    return [
        (
            "designer",
            f"{report.designer_model}: {requests} requests, {tokens_in} input + {tokens_out} "
            f"output tokens, ${fmt_float(cost, 6)} (not in the served cost)",
        ),
        ("fallbacks", f"{fallbacks} of {designed} designed (the library's best entry served)"),
    ]


def _model_designer(
    model: str, problem: Problem, library: LibraryDesigner
) -> RuntimeTopologyDesigner:
    """A `RuntimeTopologyDesigner` on the pydantic-ai model `model`: `library`'s entries as
    its seed library, its cache and registries, its best entry as the fallback spec; the
    model checked before any request (priced, built with the provider's settings).

    Raises:
        CliUsageError: the model has no price, or pydantic-ai cannot build it (an unknown
            provider, a missing key), in one line.
    """
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    from core.agents.providers import current_policy, missing_setting
    from core.agents.usage import agent_model_name
    from core.evaluation.pricing import Pricer
    from core.ir.design import TopologyDesign
    from core.runtime.tracing import ModelUsage
    from core.runtime_design.designer import RuntimeTopologyDesigner

    try:
        built = infer_model(model)
    except (UserError, ValueError, ImportError) as exc:
        setting = missing_setting(exc)
        why = " ".join(str(exc).split()) if setting is None else f"set {setting}"
        raise CliUsageError(f"--designer-model {model!r} cannot be built: {why}") from exc
    agent: Agent[None, TopologyDesign] = Agent(
        built,
        output_type=TopologyDesign,
        instructions=_DESIGNER_INSTRUCTIONS,
        name="runtime_designer",
        model_settings=current_policy().model_settings(),
    )
    quote = Pricer(problem.prices).quote(ModelUsage(agent_model_name(agent), 1, 1, 1))
    if quote.reason is not None:
        raise CliUsageError(
            f"--designer-model {model!r} has no price ({quote.reason}): add it to the "
            "problem's [models.prices] table"
        )
    return RuntimeTopologyDesigner(
        agent,
        problem.callable_registry,
        problem.agent_registry,
        seed_library=library.seed_library,
        cache=library.cache,
        fallback_spec=library.choose().entry.spec,
    )


_DESIGNER_INSTRUCTIONS = (
    "You choose the topology that serves one request: reuse or specialise one of the "
    "validated topologies you are shown, within the request's limits when it states any, "
    "naming only the registered agents and callables."
)


def _library_entries(library: str, db: str | None, out: Output) -> list[Any]:
    """The seed library `--library` names: an existing file (`load_library`), else a run id (a
    unique prefix is enough) of the run store `--db`, whose validated front it is
    (`seed_library_from_run`), as the issue's `serve-topology PROBLEM --library RUN` reads.

    Raises:
        SeedLibraryError: the file is not a library.
        CliUsageError: no such file and no such run (both said).
    """
    from core.runtime_design.seed import load_library, seed_library_from_run
    from studio.cli.runs import resolve_run_id
    from studio.cli.store import open_cli_store

    path = Path(library).expanduser()
    if path.exists() or library.endswith(".json"):
        return load_library(path)
    db_path = resolve_db_path(db)
    if not db_path.exists():
        raise CliUsageError(
            f"--library {library}: no such file, and no run database at {db_path} to find a "
            "run of that id in (give a file written by 'library RUN', or --db)"
        )
    with open_cli_store(db_path, out) as store:
        try:
            run_id = resolve_run_id(store, library)
        except CliUsageError as exc:
            raise CliUsageError(f"--library {library}: no such file, and {exc}") from exc
        return list(seed_library_from_run(store, run_id))


def cmd_serve_topology(args: argparse.Namespace, out: Output) -> int:
    """`serve-topology PROBLEM --library LIB.json [--requests FILE|-]` (see the module docstring)."""
    import asyncio

    from core.agents.usage import agent_model_name
    from core.problems import load_problem
    from core.runtime_design import InMemoryLRU
    from core.runtime_design.library import LibraryDesigner
    from studio.cli._setup import problem_overrides

    entries = _library_entries(args.library, args.db, out)
    problem = load_problem(args.problem, overrides=problem_overrides(args))
    try:
        designer = LibraryDesigner(
            entries,
            problem.callable_registry,
            problem.agent_registry,
            cache=InMemoryLRU(args.cache_size),
        )
    except ValueError as exc:
        raise CliUsageError(
            f"the library {args.library} does not fit {problem.name}: {exc}"
        ) from exc
    apply_base_url(problem.config.models.base_url)  # before a model is built from a name
    chooser = None
    if args.designer_model:
        with use_policy(problem.provider_policy):
            chooser = _model_designer(args.designer_model, problem, designer)
    bad: list[int] = []

    def on_error(n: int, why: str) -> None:
        bad.append(n)
        out.error(f"requests line {n}: {why}")

    rows: list[tuple[str, ...]] = []
    done: list[Served] = []

    def on_served(s: Served) -> None:
        rows.append(_row(s))
        done.append(s)
        if s.source == "fallback":
            out.note(
                f"requests line {s.request.line}: the designer failed, the library's best "
                f"entry served it: {s.design_error}"
            )
        if s.status != "ok":
            out.note(f"requests line {s.request.line}: {s.status}: {s.error}")
        elif out.progress_enabled:  # a terminal: say each request as it is served
            out.note(f"served line {s.request.line}: {' '.join(rows[-1][1:])}")

    source = _open_requests(args.requests)
    interrupted = False
    failed: ProviderError | None = None
    try:
        try:
            with use_policy(problem.provider_policy):  # the problem's fault settings
                report = asyncio.run(
                    serve_requests(
                        problem,
                        designer,
                        iter_requests(source, on_error),
                        on_served=on_served,
                        model_designer=chooser,
                    )
                )
        except ProviderError as exc:  # a provider that kept failing: stop as Ctrl-C does
            failed = exc
            raise KeyboardInterrupt from exc
    except KeyboardInterrupt:
        # Ctrl-C: print what was served before it, then exit 130
        interrupted = True
        report = ServeReport(
            served=done,
            best_entry=designer.choose().index + 1,
            hits=sum(s.cache_hit for s in done),
            lookups=len(done),
            designer_model=None if chooser is None else agent_model_name(chooser.designer_agent),
        )
    finally:
        if source is not sys.stdin:
            source.close()
    out.table(HEADER, rows, right=("line", "entry", "correct", "cost_usd", "latency_ms"))
    out.line(
        "(per request: spec = hash of the topology run, entry = its library entry, cache = hit "
        "when the topology cache served it; correct 1/0 against the gold answer, - when the "
        "question has none; cost_usd in USD, latency_ms in ms)"
    )
    print_totals(report, out)
    if failed is not None:
        out.error(str(failed))
    if interrupted:
        raise CliInterrupted(
            f"interrupted after {len(done)} request(s), printed above; the rest were not served"
        )
    if bad:
        out.note(f"{len(bad)} bad request line(s) skipped: {', '.join(map(str, bad))}")
        return ExitCode.USAGE
    return ExitCode.OK
