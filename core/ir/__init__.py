"""The IR: typed, frozen models of agent topologies, parsed with limits (semantics section 6).

```python
from core.ir import parse_topology, PipelineSpec, spec_hash

spec = parse_topology('{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", '
                      '"agent_name": "solver"}}]}')
```
"""

from core.ir.limits import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    MAX_DEPTH_CEILING,
    SpecLimits,
    check_limits,
    parse_operation,
    parse_topology,
)
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

__all__ = [
    "ATOMIC_KINDS",
    "COMPOSITE_KINDS",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "KINDS",
    "MAX_DEPTH_CEILING",
    "NODE_TYPES",
    "AgentSpec",
    "AgentStepSpec",
    "AnyNode",
    "FunctionStepSpec",
    "OperationSpec",
    "ParallelSpec",
    "PipelineSpec",
    "PipelineStepEntry",
    "RefinementLoopSpec",
    "RouteSpec",
    "RouterSpec",
    "SpecLimits",
    "StepConfigSpec",
    "TopologySpec",
    "check_limits",
    "parse_operation",
    "parse_topology",
]
