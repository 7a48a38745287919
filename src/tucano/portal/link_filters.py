"""The filters of the payment-link list and the reports, as a person fills them in: Brasília days
(the last 30 by default), a status, a payment method, a CPF or CNPJ, a reference, a receipt.
Read from the page's query into the payment-link feature's LinkFilters, or, for what cannot be
read, a message next to the field (never an error page)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from tucano.brazil.brasilia_time import brasilia_date, brasilia_midnight
from tucano.brazil.documents import normalize_document
from tucano.core.languages import Language
from tucano.payment_links.domain import METHOD_CARD, METHOD_PIX, STATUS_NAMES
from tucano.payment_links.filters import LinkFilters
from tucano.portal.texts import TEXTS

# The fields, as the page's query names them (the API's names, but for the days).
FIELDS = (
    "from",
    "to",
    "status",
    "paymentMethod",
    "registrationNumber",
    "userReference",
    "paymentReceipt",
)
DEFAULT_DAYS = 30
# The longest value of each text field, as the API takes it.
LONGEST = {"registrationNumber": 40, "userReference": 77, "paymentReceipt": 40}
METHODS = (str(int(METHOD_CARD)), str(int(METHOD_PIX)))


@dataclass(frozen=True)
class FilterForm:
    """The filters as the form shows them (`values`), what is wrong with them (`errors`, by
    field), and, when nothing is, the filters the services take."""

    values: dict[str, str]
    errors: dict[str, str]
    filters: LinkFilters | None
    first_day: date
    last_day: date

    def query(self, **extra: str | int) -> str:
        """The query string that asks for these filters again (and `extra`)."""
        pairs = [(name, value) for name, value in self.values.items() if value]
        pairs += [(name, str(value)) for name, value in extra.items()]
        return urlencode(pairs)


def read_filters(params: Mapping[str, str], *, now: datetime, language: Language) -> FilterForm:
    """The filters the query asks for; the last DEFAULT_DAYS Brasília days when it names none."""
    t = TEXTS[language]
    values = {name: params.get(name, "").strip() for name in FIELDS}
    errors: dict[str, str] = {}
    today = brasilia_date(now)
    if not values["from"] and not values["to"]:
        values["from"] = (today - timedelta(days=DEFAULT_DAYS - 1)).isoformat()
        values["to"] = today.isoformat()
    first = _day(values["from"], today - timedelta(days=DEFAULT_DAYS - 1))
    last = _day(values["to"], today)
    for name, day in (("from", first), ("to", last)):
        if day is None:
            errors[name] = t["filter_bad_date"]
    if first is not None and last is not None and first > last:
        errors["to"] = t["filter_reversed"]
    if values["status"] and values["status"] not in STATUS_NAMES:
        errors["status"] = t["filter_bad_choice"]
    if values["paymentMethod"] and values["paymentMethod"] not in METHODS:
        errors["paymentMethod"] = t["filter_bad_choice"]
    for name, most in LONGEST.items():
        if len(values[name]) > most:
            errors[name] = t["filter_too_long"].format(most=most)
    if values["registrationNumber"] and "registrationNumber" not in errors:
        try:
            normalize_document(values["registrationNumber"])
        except ValueError:
            errors["registrationNumber"] = t["filter_bad_document"]
    if errors or first is None or last is None:
        return FilterForm(values, errors, None, first or today, last or today)
    filters = LinkFilters(
        start=brasilia_midnight(first),
        end=brasilia_midnight(last + timedelta(days=1)) - timedelta(milliseconds=1),
        payment_receipt=values["paymentReceipt"] or None,
        status=next((s for s in STATUS_NAMES if s == values["status"]), None),
        payment_method=int(values["paymentMethod"]) if values["paymentMethod"] else None,
        registration_number=values["registrationNumber"] or None,
        user_reference=values["userReference"] or None,
    )
    return FilterForm(values, errors, filters, first, last)


def _day(text: str, default: date) -> date | None:
    """A day as a date input sends it (YYYY-MM-DD); `default` when left empty, None when it is
    not a day Tucano can count to the end of."""
    if not text:
        return default
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    if len(text) != 10 or not date(1900, 1, 1) <= day <= date(2999, 12, 31):
        return None
    return day
