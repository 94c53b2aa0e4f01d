"""The public surface of `core` is curated: pin it so a change is deliberate."""

import subprocess
import sys

import core
import core.errors

# every public name semantics.md uses, importable from `core` directly
CONTRACT_NAMES = [
    # section 1-5: steps and primitives
    "Step", "AgentStep", "FunctionStep", "coerce_step",
    "Pipeline", "StepConfig", "ErrorStrategy", "PipelineStepError",
    "Parallel", "ParallelResult", "MergeStrategy",
    "Router", "Route", "RouterError",
    "RefinementLoop", "EvalResult", "IterationRecord", "LoopResult",
    # section 6: the IR
    "AgentStepSpec", "FunctionStepSpec", "PipelineSpec", "PipelineStepEntry", "StepConfigSpec",
    "ParallelSpec", "RouterSpec", "RouteSpec", "RefinementLoopSpec", "AgentSpec",
    "OperationSpec", "TopologySpec",
    # section 7: hydration
    "CallableRegistry", "AgentRegistry", "topology_from_spec",
    # section 8: evaluation, archive, search, apply
    "GoldExample", "MetricBundle", "MetricWeights", "scalarize",
    "TopologyGene", "TopologyDesign", "MetaAgentConfig", "ArchiveEntry",
    "unpack_topology_output", "Archive", "MetaAgentSearch", "OptimizationResult",
    "apply_result",
]  # fmt: skip


def test_every_contract_name_is_importable_from_core() -> None:
    missing = [n for n in CONTRACT_NAMES if n not in core.__all__]
    assert missing == []
    for name in CONTRACT_NAMES:
        assert getattr(core, name) is not None


def test_core_all_is_the_union_of_the_subpackages() -> None:
    import core.agents
    import core.autonomy
    import core.combinators
    import core.compound
    import core.evaluation
    import core.hydrate
    import core.ir
    import core.memory
    import core.optimization
    import core.problems
    import core.runtime
    import core.runtime_design
    import core.search
    import core.storage

    union: set[str] = set()
    for mod in (
        core.errors, core.ir, core.runtime, core.agents, core.hydrate, core.combinators,
        core.evaluation, core.search, core.storage, core.problems,
        core.memory, core.autonomy, core.compound, core.optimization,
        core.runtime_design,
    ):  # fmt: skip
        union.update(mod.__all__)
        for name in mod.__all__:
            assert getattr(core, name) is getattr(mod, name), name
    assert sorted(core.__all__) == sorted(union)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        core.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_importing_the_ir_stays_light() -> None:
    # `core` loads subpackages lazily: the IR must not pull in pydantic-ai, duckdb or streamlit
    code = (
        "import sys, core.ir\n"
        "heavy = [m for m in ('pydantic_ai', 'duckdb', 'streamlit') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_error_is_exported_from_core() -> None:
    for name in core.errors.__all__:
        assert getattr(core, name) is getattr(core.errors, name)


def test_all_errors_derive_from_the_base() -> None:
    for name in core.errors.__all__:
        assert issubclass(getattr(core.errors, name), core.errors.TopologyStudioError)
