"""`--executor local|ray [--ray-address ADDR]` of `search` and `evaluate` (issue 18)."""

from __future__ import annotations

import argparse
from typing import Any

from core.evaluation.executor import Executor
from core.problems.problem import Problem
from studio._cli_common import CliUsageError

__all__ = ["add_executor_args", "make_executor"]


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


def make_executor(args: argparse.Namespace, problem: Problem) -> Executor | None:
    """The executor the command line asks for; None: local (the evaluator's default).

    Raises:
        CliUsageError: `--ray-address` without `--executor ray`, or Ray not installed.
    """
    kind = getattr(args, "executor", "local") or "local"
    address = getattr(args, "ray_address", None)
    if kind == "local":
        if address:
            raise CliUsageError("--ray-address needs --executor ray")
        return None
    try:
        from core.distributed.ray_executor import RayExecutor
    except ImportError as exc:
        raise CliUsageError(str(exc)) from None
    return RayExecutor(problem, address=address)
