"""What the deliveries pages' forms ask, read from the words a browser sends: the results list's
filters (Brasília days) and a recovery's range (datetime-local fields in Brasília time), each
refused with the text key of a message the page shows beside the form, never a bare 400."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from tucano.brazil.brasilia_time import BRASILIA, brasilia_midnight
from tucano.deliveries.models import ResultStatus
from tucano.deliveries.result_repository import ResultFilters
from tucano.deliveries.service import RECOVERY_RANGE, RECOVERY_RANGE_SLACK
from tucano.events.types import EventType
from tucano.webhooks.schemas import MAX_ID

# A datetime-local field's value, minutes only: "2026-12-07T10:30".
_MINUTE = len("2026-12-07T10:30")


@dataclass(frozen=True)
class ResultsQuery:
    """The results list's filters as sent (blank: not filtered), written back into its form."""

    webhook: str = ""
    event_type: str = ""
    status: str = ""
    start: str = ""  # a Brasília day, YYYY-MM-DD
    end: str = ""

    def parameters(self) -> dict[str, str]:
        """The filters set, as the list's query parameters (for its pager)."""
        named = {
            "webhook": self.webhook,
            "type": self.event_type,
            "status": self.status,
            "from": self.start,
            "to": self.end,
        }
        return {name: value for name, value in named.items() if value}


def webhook_id_of(text: str) -> int | None:
    """A webhook id as a form sends it, or None when it is not one."""
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    number = int(text)
    return number if 1 <= number <= MAX_ID else None


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        return None


def results_filters(asked: ResultsQuery) -> tuple[ResultFilters, list[str]]:
    """The filters of the results list, and the keys of the problems found (then the list is
    not shown): days run from Brasília's midnight to the end of the day."""
    problems: list[str] = []
    webhook_id = None
    if asked.webhook:
        webhook_id = webhook_id_of(asked.webhook)
        if webhook_id is None:
            problems.append("problem_webhook")
    event_type = None
    if asked.event_type:
        if asked.event_type in EventType.__members__:
            event_type = EventType(asked.event_type)
        else:
            problems.append("problem_event_type")
    if asked.status and asked.status not in ResultStatus.ALL:
        problems.append("problem_status")
    start = _day(asked.start) if asked.start else None
    end = _day(asked.end) if asked.end else None
    if (asked.start and start is None) or (asked.end and end is None):
        problems.append("problem_day")
    elif start is not None and end is not None and start > end:
        problems.append("problem_days_reversed")
    filters = ResultFilters(
        event_type=event_type,
        webhook_id=webhook_id,
        status=asked.status or None,
        start=None if start is None else brasilia_midnight(start),
        end=None if end is None else _end_of_day(end),
    )
    return filters, problems


def _end_of_day(day: date) -> datetime:
    if day == date.max:
        return datetime.max.replace(tzinfo=UTC)
    return brasilia_midnight(day + timedelta(days=1)) - timedelta(microseconds=1)


@dataclass(frozen=True)
class RecoveryRange:
    since: datetime  # UTC
    until: datetime


def brasilia_field(moment: datetime) -> str:
    """`moment` as a datetime-local field shows it, in Brasília time, to the second."""
    return moment.astimezone(BRASILIA).strftime("%Y-%m-%dT%H:%M:%S")


def _moment(text: str, *, end: bool) -> datetime | None:
    """A datetime-local value read as Brasília time, in UTC; a value to the minute, as the
    end of a range, covers its whole minute."""
    text = text.strip()
    if len(text) < _MINUTE or text[10:11] != "T":
        return None
    try:
        local = datetime.fromisoformat(text)
        if local.tzinfo is not None:
            return None
        moment = local.replace(tzinfo=BRASILIA).astimezone(UTC)
        if end and len(text) == _MINUTE:
            moment += timedelta(minutes=1, microseconds=-1)
    except (ValueError, OverflowError):
        return None
    return moment


def recovery_range(since: str, until: str, *, now: datetime) -> RecoveryRange | str:
    """The range a recovery form asks for (`until` blank: now), or the key of its problem."""
    if not since.strip():
        return "problem_since"
    start = _moment(since, end=False)
    finish = now if not until.strip() else _moment(until, end=True)
    if start is None or finish is None:
        return "problem_moment"
    if start > finish:
        return "problem_range_reversed"
    if finish - start > RECOVERY_RANGE + RECOVERY_RANGE_SLACK:
        return "problem_range_too_long"
    return RecoveryRange(start, finish)
