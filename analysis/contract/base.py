"""The base of every run-directory model: permissive to read, closed to write.

    file / dict ─► Model.read(data)     extra keys kept (an older or newer writer's), types checked
    writer dict ─► Model.dump(data)     schema_version set; an unnamed key of a *closed* model is
                                        a ContractError naming it; returns the JSON-ready dict
    Model.problems(data)                 the same checks as a list of one-line messages

A model is *closed* (``CLOSED = True``, the default) when every key its writer may put there is
named; blocks whose content belongs to another module or to a server (a /info dict, a probe's
findings) set ``CLOSED = False``: they name the keys analysis reads and keep the rest as given.
The exported JSON Schema says the same: ``additionalProperties: false`` on closed models.
"""
from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

SCHEMA_VERSION = 1


class ContractError(ValueError):
    """A run-directory file that does not match its model (one line per problem)."""


def one_line(e: Exception, run_dir) -> str:
    """A ContractError ("records.jsonl:6: not JSON", maybe several lines) as ONE line naming
    the file under ``run_dir`` ("RUN/records.jsonl:6: not JSON"); a message that names
    ``run_dir`` already is kept; "(and N more problems)" when there were several."""
    lines = [ln for ln in str(e).splitlines() if ln.strip()] or ["does not match the contract"]
    d = str(run_dir).rstrip("/")
    first = lines[0] if lines[0].startswith(d) else (
        f"{d}/{lines[0]}" if (Path(d) / lines[0].split(":")[0]).is_file() else f"{d}: {lines[0]}")
    n = len(lines) - 1
    return first + (f" (and {n} more problem{'s' if n > 1 else ''})" if n else "")


@contextmanager
def reading(run_dir):
    """Files of ``run_dir`` read inside: a ContractError comes out as one line naming the file."""
    try:
        yield
    except ContractError as e:
        raise ContractError(one_line(e, run_dir)) from None


class Model(BaseModel):
    """A block of a run-directory file (see the module docstring)."""
    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())
    CLOSED: ClassVar[bool] = True

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if cls.CLOSED:
            target["additionalProperties"] = False
        else:
            target.pop("additionalProperties", None)   # open: JSON Schema's default (anything)
        return schema

    # -- reading ----------------------------------------------------------------------------
    @classmethod
    def read(cls, data: Any, where: str = ""):
        """``data`` (a dict, or a model already) as this model; ContractError naming the field."""
        if isinstance(data, cls):
            return data
        try:
            return cls.model_validate(data or {})
        except ValidationError as e:
            raise ContractError(_lines(e, where or cls.__name__)) from None

    @classmethod
    def read_file(cls, path: str | Path):
        """The model of a JSON file; ContractError when it is not JSON or does not match."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ContractError(f"{p.name}: not JSON ({e})") from None
        return cls.read(data, p.name)

    def as_dict(self) -> dict:
        """The keys that were given (named ones validated), as JSON-ready values."""
        return self.model_dump(mode="json", exclude_unset=True)

    # -- writing ----------------------------------------------------------------------------
    @classmethod
    def dump(cls, data: Any) -> dict:
        """The dict to write: validated, closed models without unnamed keys, schema_version set."""
        if not isinstance(data, cls):   # as the JSON file will hold it (paths, numpy: str)
            data = json.loads(json.dumps(dict(data or {}), default=str))
        m = cls.read(data)
        if "schema_version" in cls.model_fields:
            m.schema_version = SCHEMA_VERSION
        bad = unnamed_keys(m)
        if bad:
            raise ContractError(f"{cls.__name__}: key(s) not in the contract: {', '.join(bad)} "
                                "(name them in analysis/contract/)")
        return m.as_dict()

    @classmethod
    def problems(cls, data: Any, where: str = "", written: bool = True) -> list[str]:
        """What is wrong with ``data`` as this model ([] when nothing). ``written``: also the
        writing rules (closed models, schema_version = the current one)."""
        where = where or cls.__name__
        try:
            m = cls.read(data, where)
        except ContractError as e:
            return str(e).splitlines()
        out = []
        if written:
            out += [f"{where}: {k}: not in the contract" for k in unnamed_keys(m)]
            v = getattr(m, "schema_version", SCHEMA_VERSION)
            if v != SCHEMA_VERSION:
                out.append(f"{where}: schema_version: {v!r}, expected {SCHEMA_VERSION}")
        return out


class Open(Model):
    """An open block (see the module docstring): the keys readers use named, the rest kept."""
    CLOSED = False


class RunFile(Model):
    """A whole file of the run directory (meta.json, sut.json, server.json, summary.json,
    device.json): it opens with the contract's version, which ``dump`` sets."""
    schema_version: Optional[int] = Field(
        None, description=f"the contract's version ({SCHEMA_VERSION}); absent in run directories "
                          "written before the contract")


class StatusBlock(Open):
    """An open block that opens with its ``status`` (measured, ok, n/a, ...) and, when it has no
    figures, the ``reason``; its own keys follow (pydantic puts a base's fields first)."""
    status: Optional[str] = None
    reason: Optional[str] = None


class SourcedStatus(StatusBlock):
    """A StatusBlock that also says where its figures came from (``source``)."""
    source: Optional[str] = None


def part_of(model: type[BaseModel], names: str, base: type[Model], name: str, doc: str,
            module: str) -> type[Model]:
    """A ``base`` model (Model: closed, Open: open) of some of ``model``'s fields, in the order
    ``names`` gives them, each with ``model``'s own type, default and description: a block that
    keeps part of another has one definition of each figure, not a copy."""
    fields = {n: (model.model_fields[n].annotation, copy.copy(model.model_fields[n]))
              for n in names.split()}
    return create_model(name, __base__=base, __doc__=doc, __module__=module, **fields)


def unnamed_keys(m: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of keys that closed models do not name (recursively)."""
    out = []
    if isinstance(m, Model) and m.CLOSED:
        out += [prefix + k for k in (m.model_extra or {})]
    for name in type(m).model_fields:
        out += _walk(getattr(m, name), f"{prefix}{name}.")
    return out


def _walk(v: Any, prefix: str) -> list[str]:
    if isinstance(v, BaseModel):
        return unnamed_keys(v, prefix)
    if isinstance(v, (list, tuple)):
        return [x for i, item in enumerate(v) for x in _walk(item, f"{prefix}{i}.")]
    if isinstance(v, dict):
        return [x for k, item in v.items() for x in _walk(item, f"{prefix}{k}.")]
    return []


def _lines(e: ValidationError, where: str) -> str:
    out = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top)"
        out.append(f"{where}: {loc}: {err['msg']} (got {_short(err.get('input'))})")
    return "\n".join(out)


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."
