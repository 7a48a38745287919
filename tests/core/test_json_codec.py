"""JSON for people: indented, its decimals written as they read."""

from __future__ import annotations

from decimal import Decimal

from tucano.core import json_codec


def test_indented_json_keeps_decimals_as_written() -> None:
    value = {"amount": Decimal("10.50"), "items": [1, {"note": None}]}
    assert json_codec.dumps(value, indent=True).decode() == (
        '{\n  "amount": 10.50,\n  "items": [\n    1,\n    {\n      "note": null\n    }\n  ]\n}'
    )
    assert json_codec.dumps(value) == b'{"amount":10.50,"items":[1,{"note":null}]}'
