"""YAML 1.2 (core schema) for every YAML text a user writes: scenario files, ``--set`` values, the
run directory's scenario.yaml. PyYAML alone is YAML 1.1, where ``on``/``off``/``yes``/``no`` are
booleans, ``1:30`` is 90 and ``0755`` is octal; here they are what YAML 1.2 says.

    text ─► load(text) ─► Loader (a PyYAML SafeLoader whose implicit resolvers are YAML 1.2 core):
              null    ~ | null | Null | NULL | (empty)
              bool    true | True | TRUE | false | False | FALSE      (nothing else)
              int     [-+]?[0-9]+ (decimal, "0755" is 755) | 0o[0-7]+ | 0x[0-9a-fA-F]+
              float   [-+]?(.5 | 1 | 1. | 1.5)([eE][-+]?[0-9]+)? | [-+]?.inf | .nan (any case pair)
              str     everything else: on, off, yes, no, y, n, 1:30, 2024-01-01, 1_000, =
         anchors and aliases as in PyYAML (an alias is the same object: loadgen.scenario.loader's
         check_tree_size sizes it once); merge keys (<<) kept
    data ─► dump(data) ─► a YAML text that reads back the same under YAML 1.2 AND 1.1: a string
         either schema would read as something else ("on", "0o17", "1e3", "1:30") is quoted

``YAML11_BOOL_WORDS``: the words YAML 1.1 (and pydantic's lax mode) take as booleans; a boolean
field given one of them as a string is refused by the scenario model (loadgen.scenario.strict).
"""
from __future__ import annotations

import re
from typing import Any

import yaml

YAML11_BOOL_WORDS = frozenset({"on", "off", "yes", "no", "y", "n"})

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_FIRST = {  # first characters each resolver can start with (PyYAML indexes resolvers by it)
    "null": ["~", "n", "N", ""],
    "bool": list("tTfF"),
    "int": list("-+0123456789"),
    "float": list("-+.0123456789"),
}
_CORE = [("tag:yaml.org,2002:null", _NULL, "null"), ("tag:yaml.org,2002:bool", _BOOL, "bool"),
         ("tag:yaml.org,2002:int", _INT, "int"), ("tag:yaml.org,2002:float", _FLOAT, "float")]
_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
            "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}


class Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader with YAML 1.2 core implicit types (the module docstring)."""

    def construct_yaml_bool(self, node):
        value = self.construct_scalar(node)
        if value.lower() not in ("true", "false"):
            raise yaml.constructor.ConstructorError(
                None, None, f"'{value}' is not a YAML 1.2 boolean (true or false)", node.start_mark)
        return value.lower() == "true"

    def construct_yaml_int(self, node):
        value = self.construct_scalar(node)
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)

    def construct_yaml_float(self, node):
        value = self.construct_scalar(node).lower()
        if value.lstrip("+-") == ".inf":
            return float("-inf") if value.startswith("-") else float("inf")
        if value == ".nan":
            return float("nan")
        return float(value)


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _rx, _kind in _CORE:
    Loader.add_implicit_resolver(_tag, _rx, _FIRST[_kind])
Loader.add_constructor("tag:yaml.org,2002:bool", Loader.construct_yaml_bool)
Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)


class Dumper(yaml.SafeDumper):
    """PyYAML's SafeDumper that also quotes what YAML 1.2 core would read as a non-string."""


Dumper.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeDumper.yaml_implicit_resolvers.items()}
for _tag, _rx, _kind in _CORE:
    Dumper.add_implicit_resolver(_tag, _rx, _FIRST[_kind])

YAMLError = yaml.YAMLError


def load(text: str) -> Any:
    """One YAML document, YAML 1.2 core schema."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 — a SafeLoader subclass


def dump(data: Any, **kwargs) -> str:
    """YAML text that reads back as ``data`` under YAML 1.2 and 1.1 (ambiguous strings quoted)."""
    return yaml.dump(data, Dumper=Dumper, **kwargs)


def load_all(text: str) -> list:
    """Every document of a multi-document text (``---`` between them), YAML 1.2 core schema."""
    return list(yaml.load_all(text, Loader=Loader))  # noqa: S506 — a SafeLoader subclass
