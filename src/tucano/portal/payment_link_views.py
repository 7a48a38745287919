"""What the portal's payment-link pages show, from the payment-link feature's own services and its
presenter (the document the API answers), scoped to the session's customer and written in the
page's language: a page of the list, and one link with its payment, refunds and checkout URL."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import segno
from markupsafe import escape

from tucano.core.languages import Language, moment, money
from tucano.core.paging import PageRequest
from tucano.payment_links import service as payment_links
from tucano.payment_links.deps import PaymentLinks
from tucano.payment_links.filters import LinkFilters
from tucano.portal.texts import TEXTS

LINKS_PER_PAGE = 20
NEWEST_FIRST = ["creationDate,desc"]


def status_key(document: Mapping[str, Any]) -> str:
    """The link's status as the portal names it: a PAID link refunded in part is shown so."""
    name = str(document["status"]["description"])
    if name == "PAID" and document["refundedAmount"] > 0:
        return "PARTIALLY_REFUNDED"
    return name


@dataclass(frozen=True)
class LinkLine:
    """One row of the links table."""

    uuid: str
    created: str
    payer_name: str
    amount: str
    status: str
    status_key: str
    payment: str
    user_reference: str


@dataclass(frozen=True)
class LinksPage:
    lines: list[LinkLine]
    total: int
    page: int
    pages: int


async def links_page(
    links: PaymentLinks,
    *,
    customer_id: int,
    filters: LinkFilters,
    page: int,
    language: Language,
) -> LinksPage:
    """A page of the customer's links that match `filters`, newest first."""
    t = TEXTS[language]
    asked = PageRequest(max(page, 0), LINKS_PER_PAGE)
    async with links.database.read_session() as session:
        rows, total = await payment_links.list_links(
            session, customer_id=customer_id, filters=filters, sort=NEWEST_FIRST, page=asked
        )
        refunds = await payment_links.refunds_shown(session, [row for row, _ in rows])
    present = links.presenter()
    lines = []
    for row, payment in rows:
        document = present(row, payment, refunds.get(row.id, ()))
        key = status_key(document)
        lines.append(
            LinkLine(
                uuid=document["linkPaymentUuid"],
                created=moment(document["creationDate"], language),
                payer_name=document["payerName"],
                amount=money(document["amount"], language),
                status=t[f"status_{key}"],
                status_key=key.lower(),
                payment=payment_text(document["payment"], language),
                user_reference=document["userReference"] or "",
            )
        )
    return LinksPage(lines, total, asked.page, -(-total // LINKS_PER_PAGE))


def payment_text(payment: Mapping[str, Any] | None, language: Language) -> str:
    t = TEXTS[language]
    if payment is None:
        return t["not_paid"]
    method = t[f"method_{payment['paymentMethod']}"]
    if payment["installments"] > 1:
        return t["method_paid_in"].format(method=method, installments=payment["installments"])
    return str(method)


@dataclass(frozen=True)
class RefundLine:
    refund_id: str
    created: str
    amount: str
    status: str
    status_key: str
    reason: str
    failure_reason: str
    completed: str


@dataclass(frozen=True)
class LinkDetails:
    """One link as its page shows it, and what can be done with it."""

    uuid: str
    payer_name: str
    status: str
    status_key: str
    url: str
    qr: str  # an inline SVG, of segno's making
    facts: list[tuple[str, str]]
    payment: list[tuple[str, str]] | None
    refunds: list[RefundLine]
    can_cancel: bool
    left_to_refund: Decimal | None  # None: not refundable


async def link_details(
    links: PaymentLinks, *, customer_id: int, link_uuid: uuid.UUID, language: Language
) -> LinkDetails:
    """The customer's link (another customer's is not found: 404)."""
    row, payment, refunds = await payment_links.read_link(
        links.database, customer_id=customer_id, link_uuid=link_uuid
    )
    document = links.presenter()(row, payment, refunds)
    t = TEXTS[language]
    key = status_key(document)
    lines = [_refund_line(refund, language) for refund in document["refunds"]]
    left = None
    if document["status"]["description"] == "PAID" and document["payment"] is not None:
        taken = sum(
            (r["amount"] for r in document["refunds"] if r["status"] != "FAILED"), Decimal(0)
        )
        left = document["payment"]["amount"] - taken
    return LinkDetails(
        uuid=document["linkPaymentUuid"],
        payer_name=document["payerName"],
        status=t[f"status_{key}"],
        status_key=key.lower(),
        url=document["urlPayment"],
        qr=qr_svg(document["urlPayment"], t["pl_qr"]),
        facts=_facts(document, language),
        payment=_payment_facts(document["payment"], language),
        refunds=lines,
        can_cancel=document["status"]["description"] == "CREATED",
        left_to_refund=left if left is not None and left > 0 else None,
    )


def _facts(document: Mapping[str, Any], language: Language) -> list[tuple[str, str]]:
    t = TEXTS[language]
    options = " · ".join(
        f"{o['numberInstallments']}x {money(o['amountInstallment'], language)}"
        for o in document["installmentsOptions"]
    )
    return [
        (t["fact_uuid"], document["linkPaymentUuid"]),
        (t["fact_payer"], document["payerName"]),
        (t["fact_registration_number"], document["registrationNumber"]),
        (t["fact_amount"], money(document["amount"], language)),
        (
            t["fact_installments"],
            t["fact_installments_value"].format(n=document["numbersInstallments"], options=options),
        ),
        (t["fact_description"], document["description"] or t["none"]),
        (t["fact_user_reference"], document["userReference"] or t["none"]),
        (t["fact_verification_token"], str(document["verificationToken"])),
        (t["fact_created"], moment(document["creationDate"], language)),
        (
            t["fact_expiration"],
            t["fact_expiration_value"].format(
                moment=moment(document["expirationDate"], language),
                days=document["expirationDays"],
            ),
        ),
        (t["fact_refunded"], money(document["refundedAmount"], language)),
    ]


def _payment_facts(
    payment: Mapping[str, Any] | None, language: Language
) -> list[tuple[str, str]] | None:
    if payment is None:
        return None
    t = TEXTS[language]
    return [
        (t["pay_method"], t[f"method_{payment['paymentMethod']}"]),
        (t["pay_id"], payment["paymentId"]),
        (t["pay_receipt"], payment["paymentReceipt"]),
        (t["pay_date"], moment(payment["paymentDate"], language)),
        (t["pay_installments"], str(payment["installments"])),
        (t["pay_amount"], money(payment["amount"], language)),
    ]


def _refund_line(refund: Mapping[str, Any], language: Language) -> RefundLine:
    t = TEXTS[language]
    completed = refund["completedAt"]
    return RefundLine(
        refund_id=refund["refundId"],
        created=moment(refund["createdAt"], language),
        amount=money(refund["amount"], language),
        status=t[f"refund_{refund['status']}"],
        status_key=refund["status"].lower(),
        reason=refund["reason"] or t["none"],
        failure_reason=refund["failureReason"] or t["none"],
        completed=moment(completed, language) if completed is not None else t["none"],
    )


def refund_outcome(details: LinkDetails, refund_id: str | None, language: Language) -> str | None:
    """What the page says after a refund was asked for: how it ended (or that it is pending)."""
    t = TEXTS[language]
    for line in details.refunds:
        if line.refund_id == refund_id:
            return t[f"done_refund_{line.status_key.upper()}"].format(
                amount=line.amount, reason=line.failure_reason
            )
    return None


def qr_svg(text: str, label: str) -> str:
    """`text` as an inline SVG QR code, sized by the stylesheet (printed as it is shown)."""
    svg: str = segno.make(text, error="m", micro=False).svg_inline(
        scale=1,
        border=4,
        omitsize=True,
        svgclass="qr-code",
        lineclass=None,
        title=label,
        dark="#000",
        light="#fff",
    )
    # The title is escaped by segno; the label, in an attribute, by markupsafe.
    return svg.replace("<svg ", f'<svg role="img" aria-label="{escape(label)}" ', 1)
