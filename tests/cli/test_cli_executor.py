"""`--executor` and `--ray-address` (issue 18): parsed on `search` and `evaluate`; local is the
default and builds no executor; an address without `--executor ray` is a usage error."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from core.problems import load_problem
from studio._cli_common import CliUsageError
from studio._cli_executor import make_executor
from studio.cli import build_parser

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
    from studio._cli_executor import parse_rate_limit, rate_limits

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
