"""The docs that describe behaviour are checked against the code that has it."""

from __future__ import annotations

import re
from pathlib import Path

from tucano.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent


def test_error_code_table_matches_the_code() -> None:
    rows = re.findall(
        r"^\| (\d+) \| (\d{3}) \| ([^|]+) \|", (ROOT / "docs" / "errors.md").read_text(), re.M
    )
    documented = {(int(code), int(status), message.strip()) for code, status, message in rows}
    assert documented == {(c.value, c.status, c.message) for c in ErrorCode}


def test_readme_starts_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    first_commands = re.findall(r"^\./scripts/(\w+)", readme, re.M)[:2]
    assert first_commands == ["serve", "test"]
    assert "./scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_every_setting_is_in_the_operations_table() -> None:
    from tucano.config import Settings

    rows = re.findall(r"^\| `(TUCANO_\w+)` \|", (ROOT / "docs" / "operations.md").read_text(), re.M)
    assert sorted(rows) == sorted(f"TUCANO_{name.upper()}" for name in Settings.model_fields)


def test_the_operation_ids_in_the_docs_are_the_documents() -> None:
    from tucano.openapi import OPERATION_IDS

    rows = re.findall(
        r"^\| `([A-Z]+ /[^`]*)` \| `(\w+)` \|$", (ROOT / "docs" / "clients.md").read_text(), re.M
    )
    assert dict(rows) == OPERATION_IDS
