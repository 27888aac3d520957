"""The documented contract matches the code: every code in docs/validator.md, and the
JSON Schema accepts what the loader accepts and refuses what it refuses."""

from __future__ import annotations

import importlib.util
import json
import re

import jsonschema
import pytest

from ssewire.mcp import RULES
from tests.support import ROOT
from tests.support.conformant_sessions import BASES
from tests.support.fault_cases import CASES
from tests.support.mcp_helpers import BAD_DOCUMENTS

DOCS = ROOT / "docs"
SCHEMA = jsonschema.Draft202012Validator(json.loads((DOCS / "transcript.schema.json").read_text()))


def test_every_code_is_documented_with_its_level_and_keyword():
    # the table rows: | `code` | level ... | KEYWORD, section ... | meaning |
    rows = {
        code: (level, keyword.strip())
        for code, level, keyword in re.findall(
            r"^\| `([a-z_0-9]+)` \| ([a-z]+)[^|]*\| ([A-Za-z ]+)[,|]",
            (DOCS / "validator.md").read_text(),
            re.MULTILINE,
        )
    }
    assert set(rows) == set(RULES)
    assert rows == {code: (rule.level, rule.keyword) for code, rule in RULES.items()}


@pytest.mark.parametrize("document", [base() for base in BASES.values()] + [case.invalid() for case in CASES])
def test_schema_accepts_every_fixture(document):
    SCHEMA.validate(document)


@pytest.mark.parametrize(
    "document",
    [d for name, d in BAD_DOCUMENTS.items() if name not in ("duplicate exchange ids", "bad base64")],
    ids=[name for name in BAD_DOCUMENTS if name not in ("duplicate exchange ids", "bad base64")],
)
def test_schema_refuses_what_the_loader_refuses(document):
    # (unique ids and base64 content are beyond JSON Schema; the loader checks them)
    assert not SCHEMA.is_valid(document)


def test_the_codes_page_is_generated_from_the_registry():
    spec = importlib.util.spec_from_file_location("mcp_codes", DOCS.parent / "scripts" / "mcp_codes.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert (DOCS / "mcp-codes.md").read_text(encoding="utf-8") == script.render()
    assert all(f"| `{code}` |" in script.render() for code in RULES)
