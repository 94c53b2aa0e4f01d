"""Every public name the five reference docs document is importable from `core`, except the
names we deliberately do not provide, whose `ImportError` names the replacement (for
`core.X` and for `from core import X` alike). docs/reference-compat.md lists the same names
with their status."""

from __future__ import annotations

import pytest

import core

DOCUMENTED = [
    # orchestration-guide.txt
    "Step", "AgentStep", "FunctionStep", "BaseAgent", "GlobalState", "Pipeline", "StepConfig",
    "ErrorStrategy", "PipelineStepError", "PipelineEvent", "Parallel", "MergeStrategy",
    "ParallelResult", "Router", "Route", "RouterError", "RefinementLoop", "EvalResult",
    "LoopResult", "IterationRecord",
    # topology-optimization-api.txt
    "OperationSpec", "TopologySpec", "StepConfigSpec", "AgentStepSpec", "FunctionStepSpec",
    "PipelineStepEntry", "PipelineSpec", "ParallelSpec", "RouteSpec", "RouterSpec",
    "RefinementLoopSpec", "AgentSpec", "AgentFactory", "CallableRegistry", "pipeline_from_spec",
    "parallel_from_spec", "router_from_spec", "refinement_loop_from_spec", "topology_from_spec",
    "TopologyGene", "TopologyEvaluator", "GoldExample", "MetricBundle", "MetricWeights",
    "unpack_topology_output", "MetaAgentConfig", "ArchiveStrategy", "ArchiveEntry",
    "TopologyDesign", "Archive", "MetaAgentSearch", "OptimizationResult", "EventBus",
    # topology-optimization-guide.txt (beyond the above)
    "apply_result", "MetaOrchestrator", "MemoryEntry", "TaskDecomposition", "SubTask",
    # autonomy-guide.txt
    "ToolSpec", "GeneratedToolSpec", "DynamicAgent", "ToolRegistry", "MCPDiscovery",
    "MCPServerManager", "AllowList", "PermissionGate", "DenyAll", "ExecutionResult",
    "MetacognitionConfig", "HookRunner", "Continue", "Skip", "Redirect", "Abort",
    "HookAbortError", "DynamicToolFactory", "MemoryStore",
    # compound-tools-api.txt
    "SubAgentTool", "SubAgentResult", "SubAgentEvalResult",
    # topology-optimization-guide.txt, two-phase prompts
    "PromptGene", "Genome", "OptimizationRunner", "OptimizationConfig", "Evaluator",
    # topology-optimization-guide.txt, runtime topology design
    "RuntimeTopologyDesigner", "TopologyOrchestrator", "TopologyCache", "NoCache",
    "InMemoryLRU", "MemoryStoreCache",
]  # fmt: skip

REPLACED = {
    "SubprocessSandbox": "core.BubblewrapSandbox",
    "DockerSandbox": "core.BubblewrapSandbox",
    "LocalMemoryStore": "core.DuckDBMemoryStore",
    "Workbench": "core.EventBus",
    "ConfidenceProtocol": "confidence_protocol",
}


def test_every_documented_name_is_importable_from_core() -> None:
    missing = [n for n in DOCUMENTED if n not in core.__all__]
    assert missing == []
    for name in DOCUMENTED:
        assert getattr(core, name) is not None, name


@pytest.mark.parametrize(("name", "replacement"), sorted(REPLACED.items()))
def test_names_we_do_not_provide_name_their_replacement(name: str, replacement: str) -> None:
    with pytest.raises(
        ImportError, match=f"cannot import name '{name}' from 'core': .*{replacement}"
    ):
        getattr(core, name)
