"""What a PSP's API Pix (v2) answers, as Tucano reads it: charges (`cob`), the Pix received for
them, refunds (`devolucao`), and RFC 7807 problems turned into exceptions.

The PSP's documents are checked with Pydantic models of the fields Tucano uses (others are
ignored) and handed on as frozen dataclasses, money as Decimal and moments in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

_MONEY = re.compile(r"[0-9]{1,10}\.[0-9]{2}")


class ChargeStatus(StrEnum):
    ATIVA = "ATIVA"  # payable (until its expiry: the status does not follow it)
    CONCLUIDA = "CONCLUIDA"  # paid: `Charge.paid` holds the Pix
    REMOVIDA_PELO_USUARIO_RECEBEDOR = "REMOVIDA_PELO_USUARIO_RECEBEDOR"  # withdrawn by Tucano
    REMOVIDA_PELO_PSP = "REMOVIDA_PELO_PSP"  # removed by the PSP (expired, for some PSPs)


class RefundStatus(StrEnum):
    EM_PROCESSAMENTO = "EM_PROCESSAMENTO"  # asked; the final status comes later
    DEVOLVIDO = "DEVOLVIDO"  # the money went back to the payer
    NAO_REALIZADO = "NAO_REALIZADO"  # refused: `Refund.reason` says why


class PspFailure(Exception):
    """A call to the PSP did not give an answer Tucano can use."""

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed if made again shortly."""
        return False


@dataclass(frozen=True)
class Violation:
    """One item of a problem's `violacoes`: the property at fault and why."""

    property: str
    reason: str


class PspError(PspFailure):
    """The PSP answered with an error: an RFC 7807 problem (or an answer Tucano cannot read,
    whose `type` is then `about:blank`). `detail` and `violations` are the PSP's words: fit for
    a log or an operator, never for a payer's page."""

    def __init__(
        self,
        status: int,
        type: str,  # RFC 7807's name for it
        title: str,
        detail: str | None = None,
        violations: tuple[Violation, ...] = (),
    ) -> None:
        super().__init__(f"{status} {type}: {title}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.violations = violations

    @property
    def retryable(self) -> bool:
        # The PSP failed (5xx) or asked to slow down (429): the request itself may be right.
        return self.status >= 500 or self.status == 429


class PspUnavailable(PspFailure):
    """No answer: the PSP could not be reached, or did not answer within the timeout."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self._retryable = retryable

    @property
    def retryable(self) -> bool:
        # A certificate refused (ours or the PSP's) stays refused on a retry.
        return self._retryable


@dataclass(frozen=True)
class ReceivedPix:
    """A Pix the PSP received for a charge."""

    end_to_end_id: str
    txid: str | None
    amount: Decimal
    paid_at: datetime  # UTC


@dataclass(frozen=True)
class Charge:
    """An immediate charge (`cob`) at the PSP."""

    txid: str
    status: ChargeStatus
    revision: int
    pix_copia_e_cola: str | None  # the BR Code the payer pays; a PSP may omit it once removed
    location: str | None
    created_at: datetime  # UTC
    expires_in_seconds: int  # from created_at
    amount: Decimal
    paid: tuple[ReceivedPix, ...]


@dataclass(frozen=True)
class Refund:
    """A refund (`devolucao`) of a received Pix."""

    id: str
    rtr_id: str  # the refund's own end-to-end id
    amount: Decimal
    status: RefundStatus
    reason: str | None  # `motivo`: why it was refused, mostly
    settled_at: datetime | None  # UTC, once DEVOLVIDO


def _money(value: Any) -> Decimal:
    # The spec's amounts are strings with two decimals; a JSON number would have been a float.
    if not isinstance(value, str) or not _MONEY.fullmatch(value):
        raise ValueError("not an amount such as 10.00")
    return Decimal(value)


def _utc(moment: datetime) -> datetime:
    # RFC 3339 carries an offset; a PSP that leaves it out means UTC, as the spec's examples do.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


Money = Annotated[Decimal, BeforeValidator(_money)]
Moment = Annotated[datetime, AfterValidator(_utc)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Calendario(_Wire):
    criacao: Moment
    expiracao: int = 86400  # the spec's default


class _Valor(_Wire):
    original: Money


class _Loc(_Wire):
    location: str | None = None


class _Pix(_Wire):
    end_to_end_id: str = Field(alias="endToEndId")
    txid: str | None = None
    valor: Money
    horario: Moment


class _Cob(_Wire):
    txid: str
    status: ChargeStatus
    revisao: int = 0
    calendario: _Calendario
    valor: _Valor
    location: str | None = None
    loc: _Loc | None = None
    pix_copia_e_cola: str | None = Field(default=None, alias="pixCopiaECola")
    pix: list[_Pix] = Field(default_factory=list)


class _HorarioDevolucao(_Wire):
    liquidacao: Moment | None = None


class _Devolucao(_Wire):
    id: str
    rtr_id: str = Field(alias="rtrId")
    valor: Money
    status: RefundStatus
    motivo: str | None = None
    horario: _HorarioDevolucao = Field(default_factory=_HorarioDevolucao)


class _Violacao(_Wire):
    razao: str = ""
    propriedade: str = ""


class _Problema(_Wire):
    type: str = "about:blank"
    title: str = ""
    detail: str | None = None
    violacoes: list[_Violacao] = Field(default_factory=list)


def _unreadable(status: int, what: str, error: ValidationError) -> PspError:
    # Field paths only: the values may be a payer's data.
    fields = sorted({".".join(str(p) for p in e["loc"]) for e in error.errors()})
    return PspError(status, "about:blank", f"Unreadable {what}", f"fields: {', '.join(fields)}")


def charge_from(status: int, document: Any) -> Charge:
    """The Charge in a `CobGerada`/`CobCompleta` the PSP answered with `status`."""
    try:
        cob = _Cob.model_validate(document)
    except ValidationError as error:
        raise _unreadable(status, "charge", error) from None
    return Charge(
        txid=cob.txid,
        status=cob.status,
        revision=cob.revisao,
        pix_copia_e_cola=cob.pix_copia_e_cola,
        location=cob.location or (cob.loc.location if cob.loc else None),
        created_at=cob.calendario.criacao,
        expires_in_seconds=cob.calendario.expiracao,
        amount=cob.valor.original,
        paid=tuple(
            ReceivedPix(
                end_to_end_id=pix.end_to_end_id,
                txid=pix.txid,
                amount=pix.valor,
                paid_at=pix.horario,
            )
            for pix in cob.pix
        ),
    )


def refund_from(status: int, document: Any) -> Refund:
    """The Refund in a `Devolucao` the PSP answered with `status`."""
    try:
        devolucao = _Devolucao.model_validate(document)
    except ValidationError as error:
        raise _unreadable(status, "refund", error) from None
    return Refund(
        id=devolucao.id,
        rtr_id=devolucao.rtr_id,
        amount=devolucao.valor,
        status=devolucao.status,
        reason=devolucao.motivo,
        settled_at=devolucao.horario.liquidacao,
    )


def problem_from(status: int, document: Any, *, reason: str | None) -> PspError:
    """The PspError of an error answer: its RFC 7807 body, or (a proxy's page, an OAuth error)
    what can be told from the status and the body's OAuth `error`."""
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        # RFC 6749's token endpoint errors: {"error": "invalid_client", ...}.
        description = document.get("error_description")
        detail = description if isinstance(description, str) else None
        return PspError(status, document["error"], reason or "OAuth error", detail)
    try:
        problem = _Problema.model_validate(document)
    except ValidationError:
        return PspError(status, "about:blank", reason or "Error")
    return PspError(
        status,
        problem.type,
        problem.title or reason or "Error",
        problem.detail,
        tuple(Violation(v.propriedade, v.razao) for v in problem.violacoes),
    )
