"""The curated public surface of `core.ir` and `core.hydrate` (a change must be deliberate)."""

from __future__ import annotations

import subprocess
import sys

import core.hydrate
import core.ir

IR_NAMES = [
    "ATOMIC_KINDS",
    "COMPOSITE_KINDS",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "KINDS",
    "MAX_DEPTH_CEILING",
    "NODE_TYPES",
    "SPEC_LIMITS_CONTEXT_KEY",
    "AgentSpec",
    "AgentStepSpec",
    "AnyNode",
    "FunctionStepSpec",
    "GeneratedToolSpec",
    "OperationSpec",
    "ParallelSpec",
    "PipelineSpec",
    "PipelineStepEntry",
    "RefinementLoopSpec",
    "RouteSpec",
    "RouterSpec",
    "SchemaLimits",
    "SpecLimits",
    "StepConfigSpec",
    "StructuralMetrics",
    "TopologyDesign",
    "ToolSpec",
    "TopologySpec",
    "assign_ids",
    "canonical_dict",
    "canonical_json",
    "check_limits",
    "check_output_schema",
    "check_schema",
    "design_output_schema",
    "iter_nodes",
    "node_at",
    "operation_json_schema",
    "parse_agent_spec",
    "parse_design",
    "parse_operation",
    "parse_topology",
    "remove_at",
    "replace_at",
    "schema_to_type",
    "spec_hash",
    "spec_metrics",
    "strip_node_ids",
    "to_dot",
    "topology_json_schema",
    "NodeChange",
    "diff_highlight",
    "structural_diff",
    "unified_json_diff",
]


def test_ir_all_is_pinned() -> None:
    assert core.ir.__all__ == IR_NAMES
    for name in IR_NAMES:
        assert hasattr(core.ir, name)


def test_hydrate_all_is_pinned() -> None:
    assert core.hydrate.__all__ == [
        "BUILTIN_MERGES",
        "AgentRegistry",
        "AgentRegistryLike",
        "CallableRegistry",
        "CallableRegistryLike",
        "HydrationHooks",
        "InlineAgentFactory",
        "agents_in",
        "as_agent_registry",
        "as_callable_registry",
        "parallel_from_spec",
        "pipeline_from_spec",
        "refinement_loop_from_spec",
        "router_from_spec",
        "topology_from_spec",
        "validate_names",
    ]


def test_ir_imports_without_hypothesis_or_pydantic_ai() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import core.ir, core.ir.testing\n"
        "assert 'pydantic_ai' not in sys.modules, 'core.ir imported pydantic_ai'\n"
        "try:\n"
        "    core.ir.testing.topology_specs()\n"
        "except ImportError:\n"
        "    print('lazy')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "lazy"
