"""The deployment files (Dockerfile, .dockerignore, deploy/systemd/) against the code they run:
every command line they start parses as the `tucano` command reads it, the image runs as a user
of its own, and its health check asks a route that answers."""

from __future__ import annotations

import configparser
import fnmatch
import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from typer.main import get_command

from tests.support.settings import make_settings
from tucano.app import create_app
from tucano.cli import app as cli_app
from tucano.config import Settings

ROOT = Path(__file__).resolve().parent.parent
UNITS = ROOT / "deploy" / "systemd"


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def instructions(name: str) -> list[str]:
    return [arguments for instruction, arguments in dockerfile() if instruction == name]


def parse_tucano(argv: list[str]) -> tuple[str, dict[str, object]]:
    """The subcommand and its options as `tucano` would read `argv` (raises on a bad option)."""
    assert Path(argv[0]).name == "tucano", argv
    group: Any = get_command(cli_app)  # a TyperGroup (typer brings its own click)
    name, *rest = argv[1:]
    with group.make_context("tucano", [name]) as context:
        command = group.get_command(context, name)
        assert command is not None, f"tucano has no command {name!r}"
        with command.make_context(name, rest, parent=context) as sub:
            return name, dict(sub.params)


def test_the_image_installs_the_package_and_serves_it_migrated_as_a_user_not_root() -> None:
    assert instructions("FROM") == ["python:3.11-slim"]
    copied = " ".join(instructions("COPY"))
    assert "pyproject.toml" in copied and "src" in copied
    assert any("pip install /build" in run for run in instructions("RUN"))
    (user,) = instructions("USER")
    assert user not in ("root", "0")
    assert any("useradd" in run and run.rstrip().endswith(user) for run in instructions("RUN"))

    (cmd,) = instructions("CMD")
    shell = json.loads(cmd)  # the exec form: a JSON array of strings
    assert shell[:2] == ["sh", "-c"]
    migrate, serve = (shlex.split(part.removeprefix(" exec")) for part in shell[2].split("&&"))
    assert parse_tucano(migrate)[0] == "migrate"
    name, options = parse_tucano(serve)
    assert name == "serve" and options["host"] == "0.0.0.0"
    assert instructions("EXPOSE") == [str(options["port"])]


async def test_the_image_health_check_asks_a_route_that_answers_without_the_database(
    tmp_path: Path,
) -> None:
    (check,) = instructions("HEALTHCHECK")
    url = urlsplit(re.findall(r"https?://[^'\"]+", check)[0])
    (serve_port,) = instructions("EXPOSE")
    assert url.port == int(serve_port)
    # A database that does not exist: liveness must not depend on it.
    app = create_app(make_settings(f"sqlite+aiosqlite:///{tmp_path / 'absent.db'}"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        response = await http.get(url.path)
    assert response.status_code == 200


def test_the_build_context_holds_what_the_image_copies_and_nothing_local() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def sent(path: str) -> bool:
        included = True  # the last pattern that matches decides, as Docker reads them
        for pattern in patterns:
            negated = pattern.startswith("!")
            body = pattern.removeprefix("!").rstrip("/").replace("**/", "")
            name = path if "/" in body else path.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(name, body) or path.startswith(body + "/"):
                included = negated
        return included

    for needed in ("pyproject.toml", "README.md", "src/tucano/app.py"):
        assert sent(needed), needed
    for local in (".venv/bin/python", ".git/HEAD", "tucano.db", ".env", "tests/conftest.py"):
        assert not sent(local), local
    assert not sent("src/tucano/__pycache__/app.cpython-311.pyc")


def unit(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(UNITS / name)
    return parser["Service"]


@pytest.mark.parametrize(
    ("name", "command", "stop_needs_seconds"),
    # The longest clean stops docs/operations.md gives ("Processes and signals").
    [("tucano-serve.service", "serve", 50), ("tucano-worker.service", "worker", 20)],
)
def test_the_units_run_the_command_and_give_a_graceful_stop_its_time(
    name: str, command: str, stop_needs_seconds: int
) -> None:
    service = unit(name)
    started, options = parse_tucano(shlex.split(service["ExecStart"]))
    assert started == command
    assert options["migrate"] is False
    if command == "serve":
        assert options["worker"] is False
        assert parse_tucano(shlex.split(service["ExecStartPre"]))[0] == "migrate"
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) > stop_needs_seconds
    assert service["Restart"] == "on-failure"
    assert service["EnvironmentFile"] == "/etc/tucano/tucano.env"
    assert service["User"] not in ("root", "0")
    # Room for the default connection cap (at most half the limit) without lowering it.
    default_cap = Settings.model_fields["max_connections"].default
    assert int(service["LimitNOFILE"]) >= 2 * default_cap


def test_the_environment_file_sets_only_settings_that_exist() -> None:
    names = re.findall(r"^(TUCANO_\w+)=", (UNITS / "tucano.env").read_text(), re.M)
    assert names
    known = {f"TUCANO_{field.upper()}" for field in Settings.model_fields}
    assert set(names) <= known
