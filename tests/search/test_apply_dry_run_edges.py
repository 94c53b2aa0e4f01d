"""`apply_result(..., dry_run=True)` never writes, whatever the target: every attribute of an
object target stays the very object it was, and a registry's files keep their bytes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from core.ir import TopologySpec, parse_topology
from core.search.apply import apply_result
from core.search.registry import TopologyRegistry
from core.search.result import OptimizationResult


def spec(agent: str) -> TopologySpec:
    return parse_topology(
        {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": agent}}]}
    )


OLD, NEW = spec("old"), spec("new")


def result(**specs: TopologySpec) -> OptimizationResult:
    return OptimizationResult(
        best_candidate={k: v.model_dump_json() for k, v in specs.items()},
        best_decoded=dict(specs),
        best_score=0.5,
        pareto_candidates=[],
        history=[],
    )


def test_a_dry_run_on_an_object_target_leaves_every_attribute_as_it_was() -> None:
    text = OLD.model_dump_json()
    inner = SimpleNamespace(spec=OLD)
    app = SimpleNamespace(agents=SimpleNamespace(math=inner), fallback=text)
    diffs = apply_result(result(**{"agents.math.spec": NEW, "fallback": NEW}), app)
    assert [(d.gene_name, d.changed, d.written) for d in diffs] == [
        ("agents.math.spec", True, False),
        ("fallback", True, False),
    ]
    assert app.agents.math is inner and inner.spec is OLD
    assert app.fallback is text
    assert vars(app).keys() == {"agents", "fallback"}


def test_a_dry_run_on_a_registry_writes_no_byte(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path / "reg")
    reg.write("math", OLD, None)
    before = {p: p.read_bytes() for p in sorted((tmp_path / "reg").rglob("*")) if p.is_file()}
    (diff,) = apply_result(result(math=NEW, fresh=NEW), reg)[:1]
    assert (diff.changed, diff.written, diff.new_version) == (True, False, None)
    after = {p: p.read_bytes() for p in sorted((tmp_path / "reg").rglob("*")) if p.is_file()}
    assert after == before
    assert reg.names() == ["math"]  # the new name 'fresh' was not created either
    assert reg.current("math") == (1, OLD)
