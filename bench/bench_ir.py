"""IR benchmark: parsing deep specs (F1), the limit checks, hashing, and hydration.

Prints, best of several rounds (to damp noise from other processes):

- `parse_topology` of F1's chains (pipeline / loop / parallel alternating around one agent
  step) as JSON text, 10 and 50 levels deep, with `SpecLimits(max_depth=64)`; F1's target is
  50 levels well under 50 ms;
- how fast a spec past the limit is refused (120 levels as text, 300 as a dict, a 200k-bracket
  bomb), which never reaches a recursive parser;
- `spec_hash` and `to_dot` of the 50-level spec, and hydrating it;
- issue 11 item 3: a 58 MB spec text of 10^6 agent steps refused with the default limits
  (`max_nodes=200`: by its size, `max_text_bytes`), and with the size limit lifted (by the
  streaming node count), each with the time and the peak memory the refusal allocated
  (`tracemalloc`, the text itself not counted); targets < 500 ms and < 100 MB (it used to take
  7.3 s and 525 MB).

Usage: `python bench/bench_ir.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from core.errors import SpecLimitError
from core.hydrate import AgentRegistry, CallableRegistry, topology_from_spec
from core.ir import SpecLimits, parse_topology, spec_hash, to_dot

F1_TARGET_MS = 50.0
HUGE_TARGET_MS = 500.0
HUGE_TARGET_MB = 100.0
LIMITS = SpecLimits(max_depth=64, max_nodes=1000)


def f1_chain(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"kind": "agent_step", "agent_name": "solver"}
    for i in reversed(range(levels)):
        kind = ("pipeline", "refinement_loop", "parallel")[i % 3]
        if kind == "pipeline":
            node = {"kind": "pipeline", "steps": [{"operation": node}]}
        elif kind == "refinement_loop":
            node = {
                "kind": "refinement_loop",
                "step": node,
                "evaluator": "judge",
                "state_updater_name": "update",
            }
        else:
            node = {"kind": "parallel", "steps": [node]}
    return node


def best_ms(fn: Callable[[], object], rounds: int, inner: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best * 1000


def refused(payload: str | dict[str, Any]) -> Callable[[], object]:
    def run() -> object:
        try:
            parse_topology(payload, LIMITS)
        except SpecLimitError as exc:
            return exc
        raise AssertionError("expected SpecLimitError")

    return run


def huge_text(n_steps: int) -> str:
    """A pipeline of `n_steps` agent steps as JSON text, 58 bytes a step."""
    step = '{"operation": {"kind": "agent_step", "agent_name": "a"}}'
    return '{"kind": "pipeline", "steps": [' + ", ".join([step] * n_steps) + "]}"


def refusal_figures(text: str, limits: SpecLimits) -> tuple[float, float, str]:
    """`(ms, peak MB allocated, limit name)` of one refusal of `text`."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        parse_topology(text, limits)
    except SpecLimitError as exc:
        ms = (time.perf_counter() - start) * 1000
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        return ms, peak, exc.limit
    raise AssertionError("expected SpecLimitError")


def print_huge(rounds: int) -> None:
    text = huge_text(1_000_000)
    size_mb = len(text) / 1e6
    for label, limits in (
        ("default limits", SpecLimits()),
        ("size limit lifted", SpecLimits(max_text_bytes=10**9)),
    ):
        figures = [refusal_figures(text, limits) for _ in range(rounds)]
        ms = min(f[0] for f in figures)
        peak = max(f[1] for f in figures)
        limit = figures[0][2]
        ok = ms < HUGE_TARGET_MS and peak < HUGE_TARGET_MB
        print(
            f"refuse {size_mb:.0f} MB text, {label}: {ms:8.3f} ms, peak {peak:6.2f} MB by {limit} "
            f"(target < {HUGE_TARGET_MS:.0f} ms, < {HUGE_TARGET_MB:.0f} MB: "
            f"{'OK' if ok else 'SLOW'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds: int = args.rounds

    text10 = json.dumps(f1_chain(10))
    text50 = json.dumps(f1_chain(50))
    text120 = json.dumps(f1_chain(120))
    dict300 = f1_chain(300)
    bomb = "[" * 200_000
    parse_topology(text50, LIMITS)  # warm the cached validators

    ms10 = best_ms(lambda: parse_topology(text10, LIMITS), rounds, 50)
    ms50 = best_ms(lambda: parse_topology(text50, LIMITS), rounds, 20)
    verdict = "OK" if ms50 < F1_TARGET_MS else "SLOW"
    print(f"parse F1 10 levels (text):        {ms10:8.3f} ms")
    print(
        f"parse F1 50 levels (text):        {ms50:8.3f} ms  (target < {F1_TARGET_MS:.0f} ms: {verdict})"
    )
    print(f"refuse F1 120 levels (text):      {best_ms(refused(text120), rounds, 10):8.3f} ms")
    print(f"refuse F1 300 levels (dict):      {best_ms(refused(dict300), rounds, 10):8.3f} ms")
    print(f"refuse 200k-bracket text:         {best_ms(refused(bomb), rounds, 2):8.3f} ms")

    spec = parse_topology(text50, LIMITS)
    print(
        f"spec_hash, 50 levels:             {best_ms(lambda: spec_hash(spec), rounds, 50):8.3f} ms"
    )
    print(f"to_dot, 50 levels:                {best_ms(lambda: to_dot(spec), rounds, 20):8.3f} ms")

    calls = CallableRegistry()
    calls.register("judge", lambda out: {"passed": True})
    calls.register("update", lambda inp, out, ev: out)
    agents = AgentRegistry()
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agents.register("solver", lambda: Agent(TestModel()))
    hydrate_ms = best_ms(
        lambda: topology_from_spec(spec, callable_registry=calls, agent_registry=agents),
        rounds,
        20,
    )
    print(f"topology_from_spec, 50 levels:    {hydrate_ms:8.3f} ms")
    print_huge(rounds)


if __name__ == "__main__":
    main()
