"""The base of every scenario model, and the one error a bad scenario raises."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ScenarioError(ValueError):
    """A scenario file or override that cannot be used; ``str()`` is one line for the user."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
