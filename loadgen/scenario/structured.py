"""Tool calls and structured output in a scenario: ``workload.tools``, ``workload.tool_choice``,
``api.response_format`` — the OpenAI chat shapes, checked strictly, sent as given.

    workload.tools: [Tool]     {"type": "function", "function": {name, description?, parameters?,
                               strict?}} — inline in the scenario (a list, not a file path);
                               ``parameters`` is a JSON Schema, checked as one (jsonschema)
    workload.tool_choice       "auto" | "required" | "none" | {"type": "function",
                               "function": {"name": N}} (N one of the tools)
    api.response_format        {"type": "json_object"} | {"type": "json_schema", "json_schema":
                               {name, schema, strict?, description?}} (``schema`` checked too)
    ─► body_fields(): the plain JSON the request body carries (loadgen.client.request.base_body)

The names and shapes are OpenAI's chat completions API, which vLLM, SGLang and llama.cpp's
server accept on ``/v1/chat/completions`` (vLLM: tools need ``--enable-auto-tool-choice`` and a
``--tool-call-parser``; response_format is its structured-outputs path). Completions take neither:
the scenario refuses them with ``api.endpoint: completions`` (model.Scenario).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, field_validator, model_serializer, model_validator

from loadgen.scenario.strict import Strict

NAME = r"^[A-Za-z0-9_-]{1,64}$"          # OpenAI's rule for function and schema names
MAX_TOOLS = 128                          # OpenAI's bound on tools per request


def check_schema(schema: Any) -> dict:
    """``schema`` if it is a JSON Schema (an object the jsonschema package accepts under the
    draft it names, 2020-12 by default); else ValueError with the first problem."""
    if not isinstance(schema, dict):
        raise ValueError("must be a JSON Schema object (a mapping)")
    from jsonschema import exceptions, validators     # lazy: only scenarios that use it pay
    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "top level"
        raise ValueError(f"not a valid JSON Schema at {where}: {e.message[:160]}") from None
    return schema


class ToolFunction(Strict):
    name: str = Field(pattern=NAME)
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None      # JSON Schema of the arguments object
    strict: Optional[bool] = None

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v):
        return None if v is None else check_schema(v)


class Tool(Strict):
    type: Literal["function"] = "function"
    function: ToolFunction


class ToolName(Strict):
    name: str = Field(pattern=NAME)


class NamedToolChoice(Strict):
    type: Literal["function"] = "function"
    function: ToolName


CHOICES = ("auto", "required", "none")


def _choice(v: Any) -> Any:
    if isinstance(v, str) and v not in CHOICES:
        raise ValueError(f"expected auto, required, none or {{type: function, function: {{name: "
                         f"N}}}} (got {v!r})")
    return v


ToolChoice = Annotated[Union[Literal["auto", "required", "none"], NamedToolChoice],
                       BeforeValidator(_choice)]


class JsonSchema(Strict):
    name: str = Field(pattern=NAME)
    description: Optional[str] = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: Optional[bool] = None

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v):
        return check_schema(v)

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """Dumped as ``schema`` whatever the caller's by_alias (scenario.yaml, sweeps reload it)."""
        d = handler(self)
        if isinstance(d, dict) and "schema_" in d:
            d["schema"] = d.pop("schema_")
        return d


class ResponseFormat(Strict):
    type: Literal["json_object", "json_schema"]
    json_schema: Optional[JsonSchema] = None

    @model_validator(mode="after")
    def _shape(self) -> "ResponseFormat":
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("type json_schema needs 'json_schema' ({name, schema, strict})")
        if self.type == "json_object" and self.json_schema is not None:
            raise ValueError("type json_object takes no 'json_schema' (use type json_schema)")
        return self


def check_tools(tools: Optional[list[Tool]], choice: Optional[ToolChoice]) -> None:
    """Tools named once each, at most MAX_TOOLS; a tool_choice needs tools, a named one one of them."""
    names = [t.function.name for t in tools or ()]
    if len(names) > MAX_TOOLS:
        raise ValueError(f"workload.tools: {len(names)} tools, at most {MAX_TOOLS} per request")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"workload.tools: the tool name {dup[0]!r} is given twice")
    if choice is not None and not names:
        raise ValueError("workload.tool_choice: needs workload.tools")
    if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
        raise ValueError(f"workload.tool_choice: function {choice.function.name!r} is not one of "
                         f"workload.tools ({', '.join(names)})")


def body_fields(tools: Optional[list[Tool]], choice: Optional[ToolChoice],
                response_format: Optional[ResponseFormat]) -> dict:
    """The request body's ``tools``, ``tool_choice`` and ``response_format`` as plain JSON
    (only those given)."""
    out: dict = {}
    if tools:
        out["tools"] = [t.model_dump(exclude_none=True) for t in tools]
    if choice is not None:
        out["tool_choice"] = choice if isinstance(choice, str) else choice.model_dump()
    if response_format is not None:
        out["response_format"] = response_format.model_dump(exclude_none=True, by_alias=True)
    return out
