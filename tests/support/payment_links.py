"""Helpers of the payment-link tests over HTTP: a link's body, creating it, listing."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from tests.support.service import Merchant, RunningService
from tucano.core import json_codec
from tucano.payment_links import service as payment_links

BASE = "/payment-link/v1"
LINK_FIELDS = {
    "linkPaymentUuid",
    "payerName",
    "registrationNumber",
    "amount",
    "numbersInstallments",
    "status",
    "urlPayment",
    "description",
    "verificationToken",
    "installmentsOptions",
    "userReference",
    "creationDate",
    "expirationDays",
}
CPF = "529.982.247-25"
CNPJ = "11.222.333/0001-81"
ALPHANUMERIC_CNPJ = "12.ABC.345/01DE-35"


def new_link(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "payerName": "Maria da Silva",
        "registrationNumber": CPF,
        "amount": Decimal("150.00"),
        "numbersInstallments": 3,
        "expirationDays": 5,
        "description": "Pedido 42",
        "userReference": "order-42",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


def tx() -> dict[str, str]:
    return {"x-transaction-id": str(uuid.uuid4())}


async def post_link(
    merchant: Merchant, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Any:
    return await merchant.post(
        BASE,
        content=json_codec.dumps(body),
        headers={"content-type": "application/json", **(headers if headers is not None else tx())},
    )


async def create(merchant: Merchant, **overrides: Any) -> dict[str, Any]:
    response = await post_link(merchant, new_link(**overrides))
    assert response.status_code == 200, response.text
    return dict(response.json())


def window(**params: Any) -> dict[str, Any]:
    return {
        "startDate": "2000-01-01T00:00:00.000Z",
        "endDate": "2999-12-31T23:59:59.999Z",
        **params,
    }


async def listing(merchant: Merchant, **params: Any) -> dict[str, Any]:
    response = await merchant.get(f"{BASE}/link-payment", params=window(**params), headers=tx())
    assert response.status_code == 200, response.text
    return dict(response.json())


async def pay(
    service: RunningService, merchant: Merchant, link_uuid: str, method: int, installments: int = 1
) -> None:
    """Pay a link through the payment service, as the checkout or the sandbox does."""
    async with service.database.session() as session:
        link, _ = await payment_links.get_link(
            session, customer_id=merchant.customer_id, link_uuid=uuid.UUID(link_uuid)
        )
        await payment_links.pay_link(session, link=link, method=method, installments=installments)
        await session.commit()


async def cancel(merchant: Merchant, link_uuid: str) -> None:
    """Cancel a CREATED link through the API."""
    response = await merchant.post(f"{BASE}/{link_uuid}/cancel", headers=tx())
    assert response.status_code == 200, response.text


async def refund(merchant: Merchant, link_uuid: str, **body: Any) -> dict[str, Any]:
    """Refund a PAID link through the API (`amount` defaults to what is left); the refund."""
    response = await merchant.post(
        f"{BASE}/{link_uuid}/refunds",
        content=json_codec.dumps(body),
        headers={"content-type": "application/json", **tx()},
    )
    assert response.status_code == 201, response.text
    return dict(response.json())
