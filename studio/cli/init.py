"""`init NAME`: scaffold a problem directory that loads and searches at once.

```
topology-studio init NAME --gold gold.jsonl --agent cheap=openai:gpt-4o-mini --agent dear=openai:gpt-4o
topology-studio init NAME --gold gold.jsonl --replay replay.jsonl --price cheap=0.00015:0.0006 --price dear=free
```

It writes `./NAME/` (or `--out DIR`): `problem.toml` (the agents under `[agents.<name>]`, their
prices, `[replay]` when there are recordings), `gold.jsonl`, `replay.jsonl` and `seed.json` (the
cheapest agent alone), then loads it as `search` will and prints its agents and splits
(`core.problems.replay_file.write_problem_dir`; the format: docs/own-problem.md). No
`registries.py`: `core.problems.declared` builds the problem from the TOML.

- `--gold FILE.jsonl`: `{"id", "input", "expected"}` lines (`rubric`, `weight` optional);
- `--agent NAME=MODEL`, repeated: a pydantic-ai model id; priced by genai-prices when it knows
  the model, else by `--price NAME=IN:OUT` (USD per 1K input and output tokens) or
  `--price NAME=free`, else asked for on a terminal; with no terminal, an error naming the flag;
- `--replay FILE.jsonl`: recorded outputs (`core.problems.replay_file`: one line per example
  id, agent, output, tokens and latency), each recorded agent an agent `replay:<agent>`, priced
  by `--price` (or asked for, as above);
- `--force`: replace the problem files of an existing directory (never without it).

A bad file is one error naming the line and the field (`replay.jsonl line 7: field
'output_tokens': ...`). After writing, the problem is loaded: a model that cannot be used there
(an unknown id, a missing key such as `OPENAI_API_KEY`) is that one error line, the files kept.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from studio.cli._common import CliUsageError, ExitCode
from studio.cli._output import Output

__all__ = ["add_parser", "cmd_init", "parse_price"]


def add_parser(sub: Any) -> None:
    """Register `init` on the command line's subparsers."""
    p = sub.add_parser("init", help="scaffold a problem directory from a gold file and agents")
    p.add_argument("name", metavar="NAME", help="the problem's name (and directory, ./NAME)")
    p.add_argument(
        "--gold",
        required=True,
        metavar="FILE.jsonl",
        help='gold examples, one {"id", "input", "expected"} object a line',
    )
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="an agent and its pydantic-ai model id (openai:gpt-4o-mini, ollama:llama3.1, ...); "
        "repeat for each agent",
    )
    p.add_argument(
        "--replay",
        metavar="FILE.jsonl",
        help='recorded outputs, one {"id", "agent", "output", "input_tokens", "output_tokens", '
        '"latency_ms"} object a line: each recorded agent becomes a replayed agent',
    )
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="NAME=IN:OUT",
        help="an agent's price in USD per 1K input and output tokens (or NAME=free); needed for "
        "replayed agents and models genai-prices does not know",
    )
    p.add_argument("--out", metavar="DIR", help="the directory to write (default ./NAME)")
    p.add_argument(
        "--description", default="", help="what the problem is, for people and the meta agent"
    )
    p.add_argument(
        "--force", action="store_true", help="replace the problem files of an existing directory"
    )


def parse_price(item: str) -> tuple[str, Any]:
    """`"cheap=0.00015:0.0006"` -> `("cheap", ModelPrice(input 0.00015, output 0.0006 USD per
    1K tokens))`; `"cheap=free"` -> a free price.

    Raises:
        CliUsageError: not `NAME=IN:OUT` or `NAME=free`, or a price that is not a finite number
            >= 0.
    """
    from core.evaluation.pricing import ModelPrice

    name, sep, value = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise CliUsageError(f"--price expects NAME=IN:OUT or NAME=free, got {item!r}")
    return name, _price_value(value.strip(), f"--price {item!r}", ModelPrice)


def _price_value(value: str, where: str, model_price: Any) -> Any:
    if value.casefold() == "free":
        return model_price(free=True)
    parts = value.split(":")
    try:
        numbers = [float(x) for x in parts]
    except ValueError:
        numbers = []
    if len(numbers) != 2 or not all(math.isfinite(x) and x >= 0 for x in numbers):
        raise CliUsageError(
            f"{where}: a price is IN:OUT, USD per 1K input and output tokens (two numbers >= 0, "
            "e.g. 0.00015:0.0006), or free"
        )
    return model_price(input_usd_per_1k=numbers[0], output_usd_per_1k=numbers[1])


def _parse_agents(items: list[str]) -> dict[str, str]:
    agents: dict[str, str] = {}
    for item in items:
        name, sep, model = item.partition("=")
        name, model = name.strip(), model.strip()
        if not sep or not name or not model:
            raise CliUsageError(
                f"--agent expects NAME=MODEL (e.g. cheap=openai:gpt-4o-mini), got {item!r}"
            )
        if name in agents:
            raise CliUsageError(f"--agent {name!r} is given twice")
        agents[name] = model
    return agents


def _ask_price(agent: str, model: str, stdin: IO[str], stderr: IO[str], model_price: Any) -> Any:
    stderr.write(
        f"price of agent {agent!r} ({model}), USD per 1K tokens as IN:OUT (e.g. 0.00015:0.0006) "
        "or free: "
    )
    stderr.flush()
    answer = stdin.readline().strip()
    return _price_value(answer, f"the price of {agent!r}", model_price)


def _prices(
    agents: dict[str, str],
    given: dict[str, Any],
    *,
    stdin: IO[str],
    stderr: IO[str],
    interactive: bool,
) -> tuple[dict[str, Any], dict[str, str]]:
    """model -> price for the table, and agent -> where its price comes from."""
    from core.evaluation.pricing import ModelPrice, Pricer

    known = Pricer({})
    table: dict[str, Any] = {}
    source: dict[str, str] = {}
    for agent, model in agents.items():
        if agent in given:
            table[model] = given[agent]
            source[agent] = "free (--price)" if given[agent].free else "--price"
            continue
        if not model.startswith(("replay:", "function:")) and known.resolve(
            model, fakes_free=False
        ):
            source[agent] = "genai-prices"
            continue
        if not interactive:
            raise CliUsageError(
                f"no price for agent {agent!r} (model {model!r}"
                + (
                    ", recorded outputs"
                    if model.startswith("replay:")
                    else ", which genai-prices does not know"
                )
                + f"): pass --price {agent}=IN:OUT (USD per 1K input and output tokens) or "
                f"--price {agent}=free"
            )
        table[model] = _ask_price(agent, model, stdin, stderr, ModelPrice)
        source[agent] = "free (asked)" if table[model].free else "asked"
    return table, source


def cmd_init(
    args: argparse.Namespace,
    out: Output,
    *,
    stdin: IO[str] | None = None,
    is_tty: Callable[[], bool] | None = None,
) -> int:
    """`init NAME`: write the problem directory, then load it (see the module docstring)."""
    from core.errors import ProblemError
    from core.problems import load_problem
    from core.problems.declared import resolve_model_id
    from core.problems.replay_file import read_gold_file, read_replay_file, write_problem_dir

    reader: IO[str] = stdin if stdin is not None else sys.stdin
    interactive = (is_tty or reader.isatty)()
    agents = _parse_agents(list(args.agent))
    if not agents and not args.replay:
        raise CliUsageError(
            "init: give the agents: --agent NAME=MODEL (repeated), or --replay FILE.jsonl"
        )
    gold = read_gold_file(Path(args.gold))
    for agent, model in agents.items():
        if model.startswith("replay:"):
            raise CliUsageError(
                f"--agent {agent}={model}: replayed agents come from --replay FILE.jsonl"
            )
        try:
            resolve_model_id(model)
        except ValueError as exc:
            raise CliUsageError(f"--agent {agent}: {exc}") from exc
    given = dict(parse_price(item) for item in args.price)
    table = None
    if args.replay:
        table = read_replay_file(Path(args.replay), [str(ex.id) for ex in gold])
        for recorded in table.agents:
            if recorded in agents:
                raise CliUsageError(
                    f"agent {recorded!r} is both an --agent and recorded in {args.replay}"
                )
            agents[recorded] = f"replay:{recorded}"
    unknown = sorted(set(given) - set(agents))
    if unknown:
        raise CliUsageError(
            f"--price names no agent: {', '.join(unknown)} (the agents: {', '.join(agents)})"
        )
    prices, source = _prices(
        agents, given, stdin=reader, stderr=out.stderr, interactive=interactive
    )
    target = Path(args.out).expanduser() if args.out else Path(args.name)
    write_problem_dir(
        target,
        name=args.name,
        gold=gold,
        agents=agents,
        prices=prices,
        replay=table,
        description=args.description,
        force=bool(args.force),
    )
    out.note(
        f"wrote {target}/: problem.toml, gold.jsonl, seed.json"
        + (", replay.jsonl" if table else "")
    )
    try:
        problem = load_problem(target)
    except ProblemError as exc:
        raise ProblemError(
            f"{exc} (the files are written in {target}/: fix this, then run 'topology-studio "
            f"search {target}'; 'init --force' writes them again)"
        ) from exc
    rows: list[list[Any]] = []
    for agent, model in agents.items():
        recorded = ""
        if table is not None and model.startswith("replay:"):
            recorded = str(len(table.recordings(agent)))
        rows.append([agent, model, source[agent], recorded or "-"])
    out.table(["agent", "model", "price", "recordings"], rows)
    sizes = {k: len(v) for k, v in problem.splits.items()}
    out.line(
        f"{problem.name}: {sizes.get('validation', 0)} validation and {sizes.get('test', 0)} "
        "held-out test examples"
    )
    out.line(f"next: topology-studio search {target}")
    return ExitCode.OK
