"""Content negotiation for the report (JSON by default, CSV when asked for), as a pure function."""

from __future__ import annotations

import pytest

from tucano.api.dependencies import preferred_media_type

OFFERED = ["application/json", "text/csv"]


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        ("", "application/json"),
        ("text/csv", "text/csv"),
        ("TEXT/CSV; charset=utf-8", "text/csv"),
        ("text/csv;q=0, application/json", "application/json"),  # q=0: not acceptable
        ("text/csv;q=0", "application/json"),
        ("application/json, text/csv;q=0.5", "application/json"),
        ("application/json;q=0.1, text/csv;q=0.9", "text/csv"),
        ("text/csv, application/json", "text/csv"),  # a tie goes to the first named
        ("application/json, text/csv", "application/json"),
        ("*/*", "application/json"),
        ("text/*", "text/csv"),
        ("text/html", "application/json"),  # nothing offered matches: the default
        ("text/csv;q=nonsense", "application/json"),
        ("text/*;q=0.2, text/csv;q=0", "application/json"),  # the specific range wins
    ],
)
def test_the_preferred_type_is_chosen(accept: str, chosen: str) -> None:
    assert preferred_media_type(accept, OFFERED) == chosen
