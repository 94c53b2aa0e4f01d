"""The IR: typed, frozen models of agent topologies, parsed with limits (semantics section 6).

```python
from core.ir import parse_topology, PipelineSpec, spec_hash

spec = parse_topology('{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", '
                      '"agent_name": "solver"}}]}')
```
"""

from core.ir.agent_spec import (
    GeneratedToolSpec,
    SchemaLimits,
    ToolSpec,
    check_schema,
    parse_agent_spec,
    schema_to_type,
)
from core.ir.canonical import canonical_dict, canonical_json, spec_hash, strip_node_ids
from core.ir.design import (
    SPEC_LIMITS_CONTEXT_KEY,
    TopologyDesign,
    check_output_schema,
    design_output_schema,
    parse_design,
)
from core.ir.diff import NodeChange, diff_highlight, structural_diff, unified_json_diff
from core.ir.dot import to_dot
from core.ir.ids import assign_ids
from core.ir.limits import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    MAX_DEPTH_CEILING,
    SpecLimits,
    check_limits,
    parse_operation,
    parse_topology,
)
from core.ir.metrics import StructuralMetrics, spec_metrics
from core.ir.models import (
    ATOMIC_KINDS,
    COMPOSITE_KINDS,
    KINDS,
    NODE_TYPES,
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    OperationSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
    TopologySpec,
)
from core.ir.nodes import iter_nodes, node_at, remove_at, replace_at
from core.ir.schema import operation_json_schema, topology_json_schema

__all__ = [
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
