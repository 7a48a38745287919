"""The OpenAPI document is served, complete and true to the routes."""

from __future__ import annotations

from tests.helpers import RunningService

EXPECTED_OPERATIONS = {
    ("post", "/oauth/v1/token"),
    ("get", "/webhook/v1/list"),
    ("post", "/webhook/v1/create"),
    ("get", "/webhook/v1/{id}"),
    ("put", "/webhook/v1/{id}"),
    ("delete", "/webhook/v1/{id}"),
    ("get", "/webhook/v1/{id}/secret"),
    ("post", "/webhook/v1/{id}/secret/rotate"),
}


async def test_document_lists_every_operation_with_errors_and_security(
    service: RunningService,
) -> None:
    response = await service.http.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    assert operations >= EXPECTED_OPERATIONS

    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An access token from POST /oauth/v1/token (client credentials).",
    }
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for method, path in EXPECTED_OPERATIONS - {("post", "/oauth/v1/token")}:
        operation = document["paths"][path][method]
        assert operation["security"] == [{"bearerAuth": []}], (method, path)
        responses = operation["responses"]
        assert "422" not in responses
        for status in ("400", "401", "403", "500"):
            assert responses[status]["content"]["application/json"]["schema"] == error_ref, (
                method,
                path,
                status,
            )
    assert "HTTPValidationError" not in document["components"]["schemas"]
    body = document["components"]["schemas"]["ErrorBody"]
    assert set(body["required"]) == {
        "errorCode",
        "message",
        "timestamp",
        "xTransactionId",
        "errors",
    }
    create = document["components"]["schemas"]["WebhookCreate"]
    assert set(create["required"]) == {"targetUrl", "eventType"}
    assert document["paths"]["/webhook/v1/{id}"]["delete"]["responses"]["204"]


async def test_docs_page_is_served(service: RunningService) -> None:
    response = await service.http.get("/docs")
    assert response.status_code == 200
    assert "swagger" in response.text.lower()
