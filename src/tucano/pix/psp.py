"""The merchant's PSP as the charges' jobs see it: the API Pix client's calls, with its failures
sorted into those worth trying again and those that are not."""

from __future__ import annotations

from decimal import Decimal

from tucano.config import PixProviderName, Settings
from tucano.pix.api_pix_client import ApiPixClient
from tucano.pix.api_pix_schemas import Charge, ChargeStatus, PspError, PspUnavailable
from tucano.pix.charges import PspCharge, PspRefund, PspRefused, PspUnreachable, ReceivedPix


def read(charge: Charge) -> PspCharge:
    paid = (
        tuple(ReceivedPix(end_to_end_id=p.end_to_end_id, amount=p.amount) for p in charge.paid)
        if charge.status is ChargeStatus.CONCLUIDA or charge.paid
        else ()
    )
    return PspCharge(status=str(charge.status), pix_copia_e_cola=charge.pix_copia_e_cola, paid=paid)


def sorted_failure(failure: PspError | PspUnavailable) -> Exception:
    if isinstance(failure, PspError) and not failure.retryable:
        return PspRefused(str(failure))
    return PspUnreachable(str(failure))


class ApiPixCharges:
    """ChargesAtPsp over an ApiPixClient."""

    def __init__(self, client: ApiPixClient) -> None:
        self.client = client

    async def create(
        self,
        txid: str,
        *,
        expires_in_seconds: int,
        payer_document: str,
        payer_name: str,
        amount: Decimal,
        key: str,
        description: str | None,
    ) -> PspCharge:
        try:
            charge = await self.client.put_charge(
                txid,
                expires_in_seconds=expires_in_seconds,
                payer_document=payer_document,
                payer_name=payer_name,
                amount=amount,
                key=key,
                description=description,
            )
        except (PspError, PspUnavailable) as failure:
            raise sorted_failure(failure) from failure
        return read(charge)

    async def read(self, txid: str) -> PspCharge:
        try:
            return read(await self.client.get_charge(txid))
        except (PspError, PspUnavailable) as failure:
            raise sorted_failure(failure) from failure

    async def refund(
        self, end_to_end_id: str, refund_id: str, *, amount: Decimal, description: str | None
    ) -> PspRefund:
        try:
            refund = await self.client.put_refund(end_to_end_id, refund_id, amount, description)
        except (PspError, PspUnavailable) as failure:
            raise sorted_failure(failure) from failure
        return PspRefund(
            status=str(refund.status), devolution_id=refund.rtr_id or None, reason=refund.reason
        )

    async def withdraw(self, txid: str) -> PspCharge | None:
        try:
            charge = await self.client.withdraw_charge(txid)
        except (PspError, PspUnavailable) as failure:
            raise sorted_failure(failure) from failure
        return None if charge is None else read(charge)

    async def close(self) -> None:
        await self.client.close()


def charges_at_psp(settings: Settings) -> ApiPixCharges | None:
    """The PSP's charges with TUCANO_PIX_PROVIDER=api-pix; None with any other provider."""
    if settings.pix_provider_name is not PixProviderName.API_PIX:
        return None
    return ApiPixCharges(ApiPixClient.from_settings(settings))
