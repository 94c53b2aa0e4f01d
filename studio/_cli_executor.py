"""`--executor local|ray [--ray-address ADDR]` of `search` and `evaluate` (issue 18)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from core.agents.rate_budget import ProviderLimit
from core.errors import EvaluationError
from core.evaluation.executor import Executor
from core.problems.problem import Problem
from studio._cli_common import CliUsageError

__all__ = [
    "add_executor_args",
    "executor_for",
    "make_executor",
    "parse_rate_limit",
    "rate_limits",
]


def add_executor_args(p: Any) -> None:
    """Add `--executor` and `--ray-address` to parser (or group) `p`."""
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where evaluations run: 'local' (this process and its --workers, the default) or "
        "'ray' (Ray worker actors; needs pip install 'topology-studio[ray]')",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster for --executor ray ('auto', 'HOST:6379', 'ray://HOST:10001'); "
        "default: a private local Ray instance on 127.0.0.1",
    )
    p.add_argument(
        "--rate-limit",
        action="append",
        default=[],
        type=parse_rate_limit,
        metavar="PROVIDER=RPM[:TPM[:CONCURRENT]]",
        help="one budget of model calls per provider across every worker, e.g. openai=500:200000:16 "
        "(requests and tokens per minute, calls in flight; empty parts are unlimited; '*' is every "
        "other provider); repeatable",
    )


def make_executor(args: argparse.Namespace, problem: Problem) -> Executor | None:
    """The executor the command line asks for; None: local (the evaluator's default).

    Raises:
        CliUsageError: see `executor_for`.
    """
    return executor_for(
        getattr(args, "executor", "local") or "local",
        getattr(args, "ray_address", None),
        problem,
        rate_limits(args),
    )


def executor_for(
    kind: str,
    address: str | None,
    problem: Problem,
    limits: Mapping[str, ProviderLimit] | None = None,
) -> Executor | None:
    """The executor `--executor KIND [--ray-address ADDRESS]` asks for (the studio's Start
    form passes its choice here too); None: local (the evaluator's default). Nothing is
    started: `Executor.start()` connects.

    Args:
        kind: `"local"` or `"ray"`.
        address: the Ray cluster (`core.distributed.address.check_ray_address`); None or
            "": a private local Ray on 127.0.0.1.
        problem: what the workers load (by its path).
        limits: `--rate-limit`s, provider -> limit (None or empty: none).

    Raises:
        CliUsageError: an unknown kind, an address without `ray`, a malformed address (the
            message names the forms), or Ray not installed.
    """
    address = (address or "").strip() or None
    if kind == "local":
        if address:
            raise CliUsageError("--ray-address needs --executor ray")
        return None
    if kind != "ray":
        raise CliUsageError(f"unknown executor {kind!r}: choose 'local' or 'ray'")
    from core.distributed.address import check_ray_address

    if address is not None:
        try:
            check_ray_address(address)
        except EvaluationError as exc:
            raise CliUsageError(f"--ray-address: {exc}") from None
    try:
        from core.distributed.ray_executor import RayExecutor
    except ImportError as exc:
        raise CliUsageError(str(exc)) from None
    return RayExecutor(problem, address=address, rate_limits=dict(limits or {}) or None)


def parse_rate_limit(text: str) -> tuple[str, ProviderLimit]:
    """`"openai=500:200000:16"` -> ("openai", ProviderLimit(500, 200000, 16)); empty parts
    are unlimited (`"openai=:100000"`).

    Raises:
        argparse.ArgumentTypeError: not that form, or a value out of range.
    """
    provider, sep, rest = text.partition("=")
    parts = rest.split(":")
    if not sep or not provider.strip() or len(parts) > 3:
        raise argparse.ArgumentTypeError(f"expected PROVIDER=RPM[:TPM[:CONCURRENT]], not {text!r}")
    parts += [""] * (3 - len(parts))
    try:
        limit = ProviderLimit(
            requests_per_minute=float(parts[0]) if parts[0] else None,
            tokens_per_minute=float(parts[1]) if parts[1] else None,
            max_concurrent=int(parts[2]) if parts[2] else None,
        )
    except ValueError as exc:  # (pydantic's ValidationError is a ValueError)
        raise argparse.ArgumentTypeError(f"bad rate limit {text!r}: {exc}") from None
    return provider.strip(), limit


def rate_limits(args: argparse.Namespace) -> dict[str, ProviderLimit]:
    """`--rate-limit` values as provider -> limit (a later one for a provider wins)."""
    return dict(getattr(args, "rate_limit", None) or [])
