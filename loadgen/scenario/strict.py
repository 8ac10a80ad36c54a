"""The base of every scenario model, and the one error a bad scenario raises.

Every number in a scenario is finite (no .inf / .nan), a number (true/false is not 1/0) and at
most its bound in ``loadgen.scenario.limits.UPPER`` (docs/limits.md): checked on every field of
every model, so a model that adds a field gets the first two for free. A boolean field given the
string on/off/yes/no/y/n (any case: what YAML 1.1 and pydantic's lax mode take as a boolean; the
scenario is read as YAML 1.2, analysis.contract.yaml12) is refused: write true or false. A model
whose fields are alternatives names them in ``ONE_OF`` (the fields, the message when not exactly
one of them is given).
"""
from __future__ import annotations

import difflib
import typing
from typing import ClassVar, Optional

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from analysis.contract.yaml12 import YAML11_BOOL_WORDS
from loadgen.scenario import limits


class ScenarioError(ValueError):
    """A scenario file or override that cannot be used; ``str()`` is one line for the user."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    ONE_OF: ClassVar[Optional[tuple[tuple[str, ...], str]]] = None

    @model_validator(mode="after")
    def _exactly_one(self):
        if self.ONE_OF is not None:
            names, message = self.ONE_OF
            if sum(getattr(self, n) is not None for n in names) != 1:
                raise ValueError(message)
        return self

    @field_validator("*", mode="before")
    @classmethod
    def _number_not_bool(cls, v, info: ValidationInfo):
        if isinstance(v, str) and v.lower() in YAML11_BOOL_WORDS and _is_bool(cls, info.field_name):
            raise ValueError(f"'{v}' is a YAML 1.1 boolean; write true or false")
        return limits.no_bool(cls, info.field_name, v)

    @field_validator("*", mode="after")
    @classmethod
    def _within_limits(cls, v, info: ValidationInfo):
        return limits.at_most(cls, info.field_name, v)


def _is_bool(model_cls, name: str) -> bool:
    """The field is ``bool`` or ``Optional[bool]``."""
    field = model_cls.model_fields.get(name)
    if field is None:
        return False
    ann = field.annotation
    return ann is bool or (bool in typing.get_args(ann)
                           and all(a in (bool, type(None)) for a in typing.get_args(ann)))


def _model_in(annotation) -> Optional[type[BaseModel]]:
    """The pydantic model inside ``Optional[M]``, ``list[M]``, ``dict[str, M]``, ``M``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        m = _model_in(arg)
        if m is not None:
            return m
    return None


def unknown_key(root: type[BaseModel], loc: tuple) -> str:
    """The message for an unknown key at ``loc``: "unknown key", plus " (did you mean 'x'?)"
    when a field of the model it was given to is close (difflib over the field names)."""
    model: Optional[type[BaseModel]] = root
    for part in loc[:-1]:
        if isinstance(part, int):           # a list's index: the same model
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
        if model is None:
            return "unknown key"
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return f"unknown key (did you mean '{close[0]}'?)" if close else "unknown key"

