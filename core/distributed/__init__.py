"""Evaluation beyond one machine: `core.distributed.ray_executor.RayExecutor`.

Import `RayExecutor` from `core.distributed.ray_executor` (it needs the `ray` extra:
`pip install 'topology-studio[ray]'`); this package itself imports nothing from Ray.
"""
