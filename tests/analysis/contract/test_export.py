"""docs/schema/*.json are the models' JSON Schema (`python -m analysis.contract.export
docs/schema` writes them)."""
import json
from pathlib import Path

from analysis.contract.export import SCHEMAS, export, schemas

DOCS = Path(__file__).resolve().parents[3] / "docs" / "schema"


def test_the_committed_schemas_are_the_exported_ones():
    for name, text in schemas().items():
        assert (DOCS / name).is_file(), "run: python -m analysis.contract.export docs/schema"
        assert (DOCS / name).read_text(encoding="utf-8") == text, \
            f"docs/schema/{name} is stale: python -m analysis.contract.export docs/schema"
    assert sorted(p.name for p in DOCS.glob("*.json")) == sorted(SCHEMAS)


def test_the_files_are_closed_at_the_top_and_carry_the_version(tmp_path):
    for p in export(tmp_path):
        s = json.loads(p.read_text())
        assert s["additionalProperties"] is False, p.name
        if p.name != "record.json":
            assert "schema_version" in s["properties"], p.name
