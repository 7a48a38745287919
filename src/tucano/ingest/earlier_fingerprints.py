"""Compatibility with Idempotency-Keys stored by releases before 2026-11-24.

Those releases fingerprinted a publication differently (every field of the payload in the
schema's order, as they rewrote it: identifiers as text, documents without punctuation, the
link's UUID in lower case). The rows this reads are the `event_idempotency_keys` they stored:
a retry after the upgrade is still a replay, not a 409 that would have the publisher send the
event again under a new key. A key lives 24 hours, so this module can go (with
IdempotentPublication.earlier_fingerprint) in any release that is never upgraded to directly
from one before 2026-11-24.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tucano.brazil.documents import normalize_document
from tucano.core import json_codec
from tucano.deliveries.service import NewEvent


def earlier_publication_fingerprint(event: NewEvent) -> str:
    """publication_fingerprint as releases before 2026-11-24 computed it."""
    canonical = json_codec.dumps(
        {
            "eventType": event.event_type.value,
            "customerId": event.customer_id,
            "payload": _as_earlier_releases_wrote(
                {
                    name: value
                    for name, value in event.payload.model_dump(
                        mode="python", by_alias=True
                    ).items()
                    if not (name in _FIELDS_ADDED_SINCE and value is None)
                }
            ),
        }
    )
    return hashlib.sha256(canonical).hexdigest()


_EARLIER_TEXT_FIELDS = {
    "paymentId",
    "paymentReceipt",
    "creditCardId",
    "identificationTransaction",
    "recurrenceId",
    "transactionId",
    "transferId",
    "txid",
}
_EARLIER_DOCUMENT_FIELDS = {"documentNumber", "cardholderDocument"}
# Fields of PAYMENT_LINK_INBOUND that those releases did not have: left out when unset.
_FIELDS_ADDED_SINCE = {"statusDate", "refundedAmount", "refund"}


def _as_earlier_releases_wrote(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    written = {}
    for key, item in value.items():
        if key in _EARLIER_TEXT_FIELDS and isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        elif key in _EARLIER_DOCUMENT_FIELDS and isinstance(item, str):
            item = normalize_document(item)
        elif key == "paymentLinkUuid" and isinstance(item, str):
            item = item.lower()
        written[key] = _as_earlier_releases_wrote(item)
    return written
