"""How a step's input becomes an agent prompt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["render_prompt"]


def render_prompt(value: Any) -> str:
    """Render a step input as a user prompt.

    Rule (semantics section 1): a Pydantic model is rendered as its JSON (`model_dump_json()`), a
    `str` is used as-is, anything else with `str(value)`.

    Args:
        value: the step's input.

    Returns:
        The prompt text.
    """
    if type(value) is str:
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)
