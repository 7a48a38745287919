"""The docs that describe behaviour are checked against the code that has it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.service import RunningService
from tucano.core.errors import ErrorCode

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


def _walk_through() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("## Walk-through") : readme.index("## Documentation")]


def test_the_walk_through_uses_one_base_address() -> None:
    walk = _walk_through()
    assert walk.count("BASE=http://127.0.0.1:8000") == 1
    curls = [line for line in walk.splitlines() if line.lstrip().startswith("curl ")]
    assert len(curls) >= 12
    for line in curls:
        assert "$BASE/" in line and "127.0.0.1:8000" not in line, line


def test_the_walk_through_waits_for_the_sandbox_payment_before_listing_paid_links() -> None:
    walk = _walk_through()
    listing_paid = walk.index("status=PAID")
    waited = re.findall(r"^sleep (\d+)$", walk[:listing_paid], re.M)
    assert any(int(seconds) > 30 for seconds in waited)  # the default autopay delay


def test_the_readme_names_every_event_type_and_maps_the_events_names_to_the_apis() -> None:
    from tucano.events.types import EventType

    walk = _walk_through()
    listed = re.findall(r"^\| `([A-Z_]+)` \| [^|]+ \| [^|]+ \|$", walk, re.M)
    assert listed == [event_type.value for event_type in EventType]
    for name in ("linkPaymentUuid", "paymentLinkUuid", "CREDIT_CARD", "byPaymentMethod"):
        assert name in walk, name
    assert "`1` credit card, `2` PIX" in walk


def test_the_readme_shows_screenshots_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", readme)
    assert len(shown) >= 3
    for path in shown:
        assert (ROOT / path).is_file(), path


def test_the_first_serve_says_what_it_installs_before_it_does() -> None:
    # (A fresh clone's first ./scripts/serve sat silent through a minute of pip.)
    lines = (ROOT / "scripts" / "_venv.sh").read_text().splitlines()
    for step in ("-m venv .venv", 'pip install --quiet ".$1"'):
        at = next(i for i, line in enumerate(lines) if step in line)
        before = lines[at - 1]
        assert before.lstrip().startswith("echo ") and before.endswith(">&2"), step


async def test_the_grafana_dashboard_queries_only_metrics_the_service_serves(
    service: RunningService,
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource",
        "prometheus",
    )
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            queried |= set(re.findall(r"\btucano_\w+", target["expr"]))
    queried |= set(re.findall(r"\btucano_\w+", variables["job"]["definition"]))
    assert (await service.http.get("/health/live")).status_code == 200  # a request counted
    page = (await service.http.get("/metrics")).text
    served = {
        sample.name for family in text_string_to_metric_families(page) for sample in family.samples
    }
    assert len(queried) >= 6
    assert queried <= served, queried - served


def test_the_files_the_docs_name_exist() -> None:
    """A module, test or benchmark named by its path in the README or docs/ is there."""
    named = {
        (doc.name, path)
        for doc in (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
        for path in re.findall(r"\b(?:src/tucano|tests|bench)/[\w/]+\.py\b", doc.read_text())
    }
    assert named
    assert sorted((doc, path) for doc, path in named if not (ROOT / path).is_file()) == []


def test_the_delivery_walk_names_modules_that_exist() -> None:
    """Each step of architecture.md's delivery path names a module of src/tucano/."""
    walk = (ROOT / "docs" / "architecture.md").read_text().split("## The delivery path")[1]
    steps = re.findall(r"^\d+\. \*\*`([\w/]+\.py)`\*\*", walk.split("\n## ")[0], re.M)
    assert len(steps) >= 8
    assert [step for step in steps if not (ROOT / "src" / "tucano" / step).is_file()] == []


def test_the_walk_through_keeps_secrets_in_files_only_their_owner_reads() -> None:
    walk = _walk_through()
    # A fixed name under /tmp is readable by every local user (and another may create it first).
    assert "/tmp/" not in walk
    assert walk.count("$(mktemp)") == 2


def test_the_client_generator_is_installed_with_the_formatter_it_runs() -> None:
    # openapi-python-client runs ruff on what it writes, and fails without it on PATH.
    commands = (ROOT / "docs" / "clients.md").read_text().split("```sh", 1)[1].split("```")[0]
    install = next(line for line in commands.splitlines() if line.startswith("pip install"))
    assert {"openapi-python-client", "ruff"} <= set(install.split("#")[0].split())
    assert commands.index("pip install") < commands.index("openapi-python-client generate")
