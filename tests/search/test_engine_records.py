"""Small records of the search engine: the gene, budgets and stopping, the result helpers."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from core.errors import BudgetError
from core.ir import parse_topology
from core.runtime.parallel import ParallelResult
from core.search.budget import Budget, BudgetTracker, StopSignal
from core.search.gene import TopologyGene
from core.search.result import unpack_topology_output

SEED = parse_topology(
    '{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}]}'
)


def test_gene_encode_decode_round_trip_and_fallbacks() -> None:
    gene = TopologyGene(name="g", initial=SEED)
    assert gene.decode(gene.encode()) == SEED
    assert gene.decode(None) is SEED
    assert gene.decode("   ") is SEED
    assert gene.decode("{not json") is SEED
    assert gene.decode('{"kind": "pipeline", "steps": []}') is SEED
    other = '{"kind": "parallel", "steps": [{"kind": "agent_step", "agent_name": "b"}]}'
    assert gene.decode(other).kind == "parallel"


def test_gene_checks_its_options() -> None:
    with pytest.raises(ValueError, match="unknown step kind"):
        TopologyGene(name="g", initial=SEED, allowed_step_kinds=("agnet_step",))
    with pytest.raises(ValueError):
        TopologyGene(name="g", initial=SEED, max_depth=0)
    gene = TopologyGene(name="g", initial=SEED, allowed_step_kinds=("function_step", "agent_step"))
    assert gene.allowed_step_kinds == ("agent_step", "function_step")


@pytest.mark.parametrize("field", ["max_evaluations", "max_usd", "max_wall_s", "patience"])
def test_a_zero_budget_allows_no_work(field: str) -> None:
    with pytest.raises(BudgetError, match=f"{field}=0"):
        Budget(**{field: 0}).validate_allows_work()


def test_tracker_reasons_in_order() -> None:
    now = [100.0]
    tracker = BudgetTracker(
        Budget(max_evaluations=2, max_usd=1.0, max_wall_s=10.0, patience=3),
        clock=lambda: now[0],
    )
    assert tracker.exhausted(next_evaluation=True) is None
    tracker.evaluations = 1
    assert tracker.exhausted(next_evaluation=True) is None
    tracker.evaluations = 2
    assert tracker.exhausted() == "max_evaluations reached (2)"
    tracker.evaluations = 0
    assert tracker.record_example(("h", "q1", 0), 0.75, fresh=False) is True
    assert tracker.record_example(("h", "q1", 0), 0.75, fresh=True) is False
    assert tracker.exhausted() is None
    tracker.record_design(0.25, fresh=True)
    assert tracker.exhausted() == "max_usd reached (1 >= 1)"
    assert (tracker.usd, tracker.usd_spent, tracker.example_evaluations) == (1.0, 0.25, 1)
    tracker = BudgetTracker(Budget(max_wall_s=10.0, patience=3), clock=lambda: now[0])
    now[0] = 110.0
    assert tracker.exhausted() == "max_wall_s reached (10 s)"
    now[0] = 100.0
    tracker.since_improvement = 3
    assert tracker.exhausted() == "patience exhausted (3 evaluations without a new best)"


def test_stop_file_and_request(tmp_path: Path) -> None:
    path = tmp_path / "STOP"
    stop = StopSignal(path)
    assert stop.reason() is None
    path.write_text("")
    assert stop.reason() == f"stop file {path}"
    other = StopSignal()
    other.request("studio")
    other.request("later")
    assert other.reason() == "studio"


def test_first_sigint_requests_a_stop_second_interrupts() -> None:
    stop = StopSignal()
    before = signal.getsignal(signal.SIGINT)
    with stop.sigint_handler():
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.reason() == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_handler_is_not_installed_off_the_main_thread() -> None:
    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def work() -> None:
        with StopSignal().sigint_handler():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [before]


def test_unpack_topology_output() -> None:
    class Loopish:
        output = "looped"

    assert (
        unpack_topology_output(ParallelResult(outputs=[1, 2], errors=[None, None], merged=3)) == 3
    )
    assert unpack_topology_output(Loopish()) == "looped"
    assert unpack_topology_output("plain") == "plain"
