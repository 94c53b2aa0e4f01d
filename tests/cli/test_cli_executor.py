"""`--executor` and `--ray-address` (evaluation on Ray): parsed on `search` and `evaluate`; local is
the default and builds no executor; an address without `--executor ray` is a usage error."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from core.problems import load_problem
from studio.cli import build_parser
from studio.cli._common import CliUsageError
from studio.cli._executor import make_executor

SLEEPY = Path(__file__).resolve().parents[1] / "fixtures" / "sleepy"


@pytest.mark.parametrize("command", ["search", "evaluate"])
def test_executor_flags_parse(command: str) -> None:
    extra = [str(SLEEPY / "seed.json")] if command == "evaluate" else []
    args = build_parser().parse_args(
        [command, str(SLEEPY), *extra, "--executor", "ray", "--ray-address", "auto"]
    )
    assert (args.executor, args.ray_address) == ("ray", "auto")
    args = build_parser().parse_args([command, str(SLEEPY), *extra])
    assert (args.executor, args.ray_address) == ("local", None)


def test_local_is_no_executor_and_address_needs_ray() -> None:
    problem = load_problem(SLEEPY)
    assert make_executor(argparse.Namespace(executor="local", ray_address=None), problem) is None
    with pytest.raises(CliUsageError, match="--ray-address needs --executor ray"):
        make_executor(argparse.Namespace(executor="local", ray_address="auto"), problem)


def test_rate_limit_flag() -> None:
    from core.agents.rate_budget import ProviderLimit
    from studio.cli._executor import parse_rate_limit, rate_limits

    assert parse_rate_limit("openai=500:200000:16") == (
        "openai",
        ProviderLimit(requests_per_minute=500, tokens_per_minute=200000, max_concurrent=16),
    )
    assert parse_rate_limit("*=:100") == ("*", ProviderLimit(tokens_per_minute=100))
    for bad in ("openai", "=5", "openai=0", "openai=1:2:3:4", "openai=x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rate_limit(bad)
    args = build_parser().parse_args(
        ["evaluate", str(SLEEPY), str(SLEEPY / "seed.json"), "--rate-limit", "function=::1"]
    )
    assert rate_limits(args) == {"function": ProviderLimit(max_concurrent=1)}


def test_a_rate_limit_flag_replaces_its_providers_toml_table_and_keeps_the_others() -> None:
    from core.agents.rate_budget import ProviderLimit
    from studio.cli._executor import effective_rate_limits

    problem = load_problem(
        SLEEPY,
        overrides={
            "rate_limits.function.requests_per_minute": 60,
            "rate_limits.function.burst_s": 2.0,
            "rate_limits.openai.max_concurrent": 2,
        },
    )
    args = build_parser().parse_args(["search", str(SLEEPY), "--rate-limit", "function=::1"])
    assert effective_rate_limits(problem, args) == {
        "function": ProviderLimit(max_concurrent=1),  # the flag's, whole: no rpm, burst 60
        "openai": ProviderLimit(max_concurrent=2),  # the TOML's
    }
    none = build_parser().parse_args(["search", str(SLEEPY)])
    assert effective_rate_limits(problem, none) == {
        "function": ProviderLimit(requests_per_minute=60, burst_s=2.0),
        "openai": ProviderLimit(max_concurrent=2),
    }


def test_a_search_records_its_effective_rate_limits(tmp_path: Path) -> None:
    from core.storage.journal import journal_dir, read_journal
    from core.vocab.events import RunStarted
    from studio.cli import main

    db = tmp_path / "runs.duckdb"
    argv = ["search", str(SLEEPY), "--db", str(db), "--max-evaluations", "2", "--no-test"]
    argv += ["--set", "rate_limits.function.requests_per_minute=6000"]
    argv += ["--set", "rate_limits.openai.tokens_per_minute=1000"]
    argv += ["--rate-limit", "openai=5"]
    assert main(argv) == 0
    (journal,) = journal_dir(db).glob("*.jsonl")
    started = [e for e in read_journal(journal) if isinstance(e, RunStarted)]
    assert [e.config["rate_limits"] for e in started] == [
        {
            "function": {
                "requests_per_minute": 6000.0,
                "tokens_per_minute": None,
                "max_concurrent": None,
                "burst_s": 60.0,
            },
            "openai": {
                "requests_per_minute": 5.0,
                "tokens_per_minute": None,
                "max_concurrent": None,
                "burst_s": 60.0,
            },
        }
    ]
