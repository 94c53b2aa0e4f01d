"""In-process models a problem's TOML can name: `[agents.<name>] model = "function:<name>"`.

A pydantic-ai `FunctionModel` (a Python function standing in for a model: tests, benchmarks,
a team's own offline model) has no model id a TOML could name, so the code that owns one
registers it here first, under the id its usage is recorded as (`"function:<name>"` for
`FunctionModel(fn, model_name="<name>")`), and a declared problem (`core.problems.declared`)
takes it from here. Only models registered by this process's own code are found: a TOML never
imports anything.

```python
register_local_model("function:cheap", FunctionModel(answer, model_name="cheap"))
...  # load_problem(...) / topology-studio search on a problem naming "function:cheap"
unregister_local_model("function:cheap")
```
"""

from __future__ import annotations

from pydantic_ai.models import Model

from core.agents.usage import model_name

__all__ = ["local_model", "local_model_ids", "register_local_model", "unregister_local_model"]

_MODELS: dict[str, Model] = {}


def register_local_model(model_id: str, model: Model) -> None:
    """Register `model` under `model_id`, replacing any earlier.

    Raises:
        ValueError: `model_id` is not the name the model's usage is recorded as
            (`core.agents.model_name(model)`), so its `[models.prices]` key would not match.
    """
    recorded = model_name(model)
    if recorded != model_id:
        raise ValueError(
            f"model id {model_id!r} differs from the name its usage is recorded as, {recorded!r}"
        )
    _MODELS[model_id] = model


def unregister_local_model(model_id: str) -> None:
    """Forget `model_id` (nothing happens when it is not registered)."""
    _MODELS.pop(model_id, None)


def local_model(model_id: str) -> Model | None:
    """The model registered as `model_id`, or None."""
    return _MODELS.get(model_id)


def local_model_ids() -> list[str]:
    """Every registered id, sorted."""
    return sorted(_MODELS)
