"""What the fake PSP keeps and checks: immediate charges (`cob`), the Pix received for them and
their refunds (`devolucao`), validated as the API Pix v2.9.0 schemas say, answered in its
documents (`CobGerada`, `CobCompleta`, `Pix`, `Devolucao`) and failing as RFC 7807 problems with
its error types. No I/O here: fake_psp.py serves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from tucano.brazil.brcode import crc16_ccitt_false
from tucano.brazil.documents import is_valid_cnpj, is_valid_cpf

ERROR_BASE = "https://pix.bcb.gov.br/api/v2/error/"
ERROR_TITLES = {
    "RequisicaoInvalida": "Requisição inválida.",
    "AcessoNegado": "Acesso Negado",
    "NaoEncontrado": "Não Encontrado",
    "ErroInternoDoServidor": "Erro Interno do Servidor",
    "ServicoIndisponivel": "Serviço Indisponível",
    "IndisponibilidadePorTempoEsgotado": "Indisponibilidade por Tempo Esgotado",
    "CobNaoEncontrado": "Cobrança não encontrada.",
    "CobOperacaoInvalida": "Cobrança inválida.",
    "PixNaoEncontrado": "Pix não encontrado.",
    "PixDevolucaoNaoEncontrada": "Devolução não encontrada.",
    "PixDevolucaoInvalida": "Devolução inválida.",
    "WebhookOperacaoInvalida": "Webhook inválido.",
    "WebhookNaoEncontrado": "Webhook não encontrado.",
}
# The general error of each status the fake may be told to fail with.
ERROR_OF_STATUS = {
    400: "RequisicaoInvalida",
    403: "AcessoNegado",
    404: "NaoEncontrado",
    500: "ErroInternoDoServidor",
    503: "ServicoIndisponivel",
    504: "IndisponibilidadePorTempoEsgotado",
}

TXID = re.compile(r"[a-zA-Z0-9]{26,35}")
END_TO_END_ID = re.compile(r"[a-zA-Z0-9]{32}")
REFUND_ID = re.compile(r"[a-zA-Z0-9]{1,35}")
MONEY = re.compile(r"[0-9]{1,10}\.[0-9]{2}")
_CPF = re.compile(r"[0-9]{11}")
_CNPJ = re.compile(r"[0-9A-Z]{14}")
_INT32_MAX = 2**31 - 1
REFUND_WINDOW = timedelta(days=90)

ATIVA = "ATIVA"
CONCLUIDA = "CONCLUIDA"
REMOVIDA_PELO_USUARIO_RECEBEDOR = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
EM_PROCESSAMENTO = "EM_PROCESSAMENTO"
DEVOLVIDO: Final = "DEVOLVIDO"
NAO_REALIZADO: Final = "NAO_REALIZADO"


class Problem(Exception):
    """An RFC 7807 answer of the API Pix: `kind` names its type under ERROR_BASE."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        violacoes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.violacoes = violacoes or []

    def document(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": ERROR_BASE + self.kind,
            "title": ERROR_TITLES.get(self.kind, self.kind),
            "status": self.status,
            "detail": self.detail,
        }
        if self.violacoes:
            body["violacoes"] = self.violacoes
        return body


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, as the spec's examples write it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def money(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01')):f}"


class _Violations:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.found: list[dict[str, str]] = []

    def add(self, prop: str, reason: str) -> None:
        self.found.append({"razao": reason, "propriedade": f"{self.prefix}.{prop}"})

    def text(self, body: dict[str, Any], prop: str, limit: int, *, required: bool = False) -> None:
        value = body.get(prop)
        if value is None:
            if required:
                self.add(prop, f"O campo {prop} é obrigatório.")
        elif not isinstance(value, str) or not value or len(value) > limit:
            self.add(prop, f"O campo {prop} deve ser um texto de 1 a {limit} caracteres.")


def _check_devedor(devedor: Any, check: _Violations) -> None:
    if not isinstance(devedor, dict):
        check.add("devedor", "O objeto devedor não respeita o schema.")
        return
    cpf, cnpj = devedor.get("cpf"), devedor.get("cnpj")
    if cpf is not None and cnpj is not None:
        check.add("devedor", "devedor.cpf e devedor.cnpj não podem estar preenchidos juntos.")
    elif cpf is not None:
        if not isinstance(cpf, str) or not _CPF.fullmatch(cpf) or not is_valid_cpf(cpf):
            check.add("devedor.cpf", "O campo devedor.cpf não é um CPF válido (11 dígitos).")
    elif cnpj is not None:
        if not isinstance(cnpj, str) or not _CNPJ.fullmatch(cnpj) or not is_valid_cnpj(cnpj):
            check.add("devedor.cnpj", "O campo devedor.cnpj não é um CNPJ válido (14 caracteres).")
    else:
        check.add("devedor", "O objeto devedor deve ter devedor.cpf ou devedor.cnpj.")
    check.text(devedor, "nome", 200, required=True)


def _check_valor(valor: Any, check: _Violations, *, required: bool) -> None:
    if not isinstance(valor, dict):
        check.add("valor", "O objeto valor não respeita o schema.")
        return
    original = valor.get("original")
    if original is None:
        if required:
            check.add("valor.original", "O campo valor.original é obrigatório.")
    elif not isinstance(original, str) or not MONEY.fullmatch(original):
        check.add("valor.original", "O campo valor.original não respeita o schema.")
    elif Decimal(original) == 0 and valor.get("modalidadeAlteracao", 0) == 0:
        check.add("valor.original", "O campo valor.original é zero.")
    if valor.get("modalidadeAlteracao", 0) not in (0, 1):
        check.add("valor.modalidadeAlteracao", "modalidadeAlteracao deve ser 0 ou 1.")
    if "retirada" in valor:
        check.add("valor.retirada", "Pix Saque e Pix Troco não são oferecidos por este PSP.")


def check_cob(
    body: dict[str, Any], *, revision: bool, known_keys: frozenset[str] | None
) -> dict[str, Any]:
    """The fields of a `CobSolicitada` (PUT) or `CobRevisada` (PATCH) that the charge keeps;
    a CobOperacaoInvalida problem listing every violation otherwise."""
    check = _Violations("cob")
    calendario = body.get("calendario")
    if calendario is None:
        if not revision:
            check.add("calendario", "O objeto calendario é obrigatório.")
    elif not isinstance(calendario, dict):
        check.add("calendario", "O objeto calendario não respeita o schema.")
    elif "expiracao" in calendario:
        expiracao = calendario["expiracao"]
        if type(expiracao) is not int or not 0 < expiracao <= _INT32_MAX:
            check.add("calendario.expiracao", "O campo calendario.expiracao deve ser maior que 0.")
    if "devedor" in body:
        _check_devedor(body["devedor"], check)
    if "valor" in body or not revision:
        _check_valor(body.get("valor"), check, required=not revision)
    check.text(body, "chave", 77, required=not revision)
    chave = body.get("chave")
    if known_keys is not None and isinstance(chave, str) and chave not in known_keys:
        check.add("chave", "A chave não pertence a este usuário recebedor.")
    check.text(body, "solicitacaoPagador", 140)
    info = body.get("infoAdicionais")
    if info is not None and (
        not isinstance(info, list)
        or len(info) > 50
        or not all(
            isinstance(item, dict)
            and isinstance(item.get("nome"), str)
            and len(item["nome"]) <= 50
            and isinstance(item.get("valor"), str)
            and len(item["valor"]) <= 200
            for item in info
        )
    ):
        check.add("infoAdicionais", "O objeto infoAdicionais não respeita o schema.")
    if "loc" in body:
        check.add("loc.id", "O location referenciado por loc.id inexiste.")
    if revision and "status" in body:
        if body["status"] != REMOVIDA_PELO_USUARIO_RECEBEDOR:
            check.add("status", "O campo cob.status não respeita o schema.")
        elif len(body) > 1:
            check.add("status", "Não se remove uma cobrança junto de outras alterações.")
    if check.found:
        raise Problem(
            400,
            "CobOperacaoInvalida",
            "A requisição que busca alterar ou criar uma cobrança para pagamento imediato "
            "não respeita o schema ou está semanticamente errada.",
            check.found,
        )
    kept = ("calendario", "devedor", "valor", "chave", "solicitacaoPagador", "infoAdicionais")
    return {name: body[name] for name in kept if name in body}


def _tlv(field_id: str, value: str) -> str:
    return f"{field_id}{len(value):02d}{value}"


def dynamic_br_code(
    location: str, *, merchant_name: str, merchant_city: str, amount: Decimal | None = None
) -> str:
    """The BR Code of a dynamic charge: field 26 holds the GUI and the payload's location (25)
    instead of a key; 62-05 is `***` as the txid travels in the payload the location serves."""
    body = "".join(
        _tlv(field_id, value)
        for field_id, value in [
            ("00", "01"),
            ("01", "12"),
            ("26", _tlv("00", "br.gov.bcb.pix") + _tlv("25", location)),
            ("52", "0000"),
            ("53", "986"),
            *([("54", money(amount))] if amount is not None else []),
            ("58", "BR"),
            ("59", merchant_name[:25]),
            ("60", merchant_city[:15]),
            ("62", _tlv("05", "***")),
        ]
    )
    body += "6304"
    return f"{body}{crc16_ccitt_false(body.encode('ascii')):04X}"


@dataclass
class Charge:
    """A `cob`: what the receiving user sent (`fields`) and what the PSP added."""

    txid: str
    fields: dict[str, Any]
    request: dict[str, Any]  # the last body as sent, to tell a replay from a revision
    created_at: datetime
    loc_id: int
    location: str
    pix_copia_e_cola: str
    revisao: int = 0
    status: str = ATIVA
    end_to_end_ids: list[str] = field(default_factory=list)

    @property
    def expiracao(self) -> int:
        value: int = self.fields.get("calendario", {}).get("expiracao", 86400)
        return value

    @property
    def expires_at(self) -> datetime:
        return self.created_at + timedelta(seconds=self.expiracao)

    @property
    def original(self) -> Decimal:
        return Decimal(self.fields["valor"]["original"])

    @property
    def chave(self) -> str:
        chave: str = self.fields["chave"]
        return chave

    def unpayable_because(self, now: datetime) -> str | None:
        """Why a payer's bank would refuse to pay it now, or None."""
        if self.status != ATIVA:
            return f"its status is {self.status}"
        if now >= self.expires_at:
            return f"it expired at {timestamp(self.expires_at)}"
        return None

    def document(self, pix: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        created = timestamp(self.created_at)
        body: dict[str, Any] = {
            "calendario": {"criacao": created, "expiracao": self.expiracao},
            "txid": self.txid,
            "revisao": self.revisao,
            "loc": {"id": self.loc_id, "location": self.location, "tipoCob": "cob"},
            "location": self.location,
            "status": self.status,
        }
        body["loc"]["criacao"] = created
        body.update({k: v for k, v in self.fields.items() if k != "calendario"})
        body["pixCopiaECola"] = self.pix_copia_e_cola
        if pix:
            body["pix"] = pix
        return body


@dataclass
class Refund:
    """A `devolucao` of a received Pix."""

    id: str
    rtr_id: str
    valor: Decimal
    request: dict[str, Any]
    requested_at: datetime
    natureza: str = "ORIGINAL"
    descricao: str | None = None
    status: str = EM_PROCESSAMENTO
    settled_at: datetime | None = None
    motivo: str | None = None

    def document(self) -> dict[str, Any]:
        horario = {"solicitacao": timestamp(self.requested_at)}
        if self.settled_at is not None:
            horario["liquidacao"] = timestamp(self.settled_at)
        body: dict[str, Any] = {
            "id": self.id,
            "rtrId": self.rtr_id,
            "valor": money(self.valor),
            "natureza": self.natureza,
            "horario": horario,
            "status": self.status,
        }
        if self.descricao is not None:
            body["descricao"] = self.descricao
        if self.motivo is not None:
            body["motivo"] = self.motivo
        return body


@dataclass
class ReceivedPix:
    """A Pix the PSP received for a charge (or for a txid it was told to report)."""

    end_to_end_id: str
    txid: str
    valor: Decimal
    chave: str
    paid_at: datetime
    info_pagador: str | None = None
    refunds: dict[str, Refund] = field(default_factory=dict)

    def refundable(self) -> Decimal:
        taken = sum(
            (r.valor for r in self.refunds.values() if r.status != NAO_REALIZADO), Decimal(0)
        )
        return self.valor - taken

    def document(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "endToEndId": self.end_to_end_id,
            "txid": self.txid,
            "valor": money(self.valor),
            "componentesValor": {"original": {"valor": money(self.valor)}},
            "chave": self.chave,
            "horario": timestamp(self.paid_at),
        }
        if self.info_pagador is not None:
            body["infoPagador"] = self.info_pagador
        if self.refunds:
            body["devolucoes"] = [refund.document() for refund in self.refunds.values()]
        return body


def check_refund(body: dict[str, Any], pix: ReceivedPix, now: datetime) -> None:
    """A PixDevolucaoInvalida problem unless `body` is a `DevolucaoSolicitada` this Pix can
    take (a common Pix: natureza ORIGINAL, within what is left and within 90 days)."""
    check = _Violations("devolucao")
    valor = body.get("valor")
    if not isinstance(valor, str) or not MONEY.fullmatch(valor) or Decimal(valor) == 0:
        check.add("valor", "O campo devolucao.valor não respeita o schema.")
    elif Decimal(valor) > pix.refundable():
        check.add("valor", "A devolução, com as anteriores, excederia o valor do Pix.")
    if body.get("natureza", "ORIGINAL") != "ORIGINAL":
        check.add("natureza", "Um Pix comum só aceita devolução de natureza ORIGINAL.")
    check.text(body, "descricao", 140)
    if now - pix.paid_at > REFUND_WINDOW:
        check.add("valor", "A devolução viola a janela de 90 dias desde a liquidação do Pix.")
    if check.found:
        raise Problem(
            400,
            "PixDevolucaoInvalida",
            "A presente requisição de devolução não respeita o schema ou não faz sentido "
            "semanticamente.",
            check.found,
        )
