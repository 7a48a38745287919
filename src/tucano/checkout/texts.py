"""What the checkout says, in Portuguese (Brazil) and English, and how it writes money and time.

Portuguese unless the browser's Accept-Language prefers English. Times are Brasília's
(`America/Sao_Paulo`). Money is written with its `R$`, and the template keeps the two on one line.
"Pix" is written as the Banco Central writes it, except in the two button labels decisions.md
names literally (`Copiar código PIX`, `Simular pagamento PIX`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from tucano.brazil.brasilia_time import BRASILIA
from tucano.core.languages import Language, moment, money, preferred_language

__all__ = ["EN", "PT", "TEXTS", "Language", "hour", "moment", "money", "preferred_language"]


def hour(value: datetime) -> str:
    return value.astimezone(BRASILIA).strftime("%H:%M")


# The test cards are written with no-break spaces: a card number typed on the form (with plain
# spaces) is then never found in a page, not even as this hint.
PT: Mapping[str, str] = {
    "page_title": "Pagamento de {amount}",
    "charge_from": "Cobrança de {merchant}",
    "payer": "Pagador",
    "payee": "Recebedor",
    "amount": "Valor",
    "description": "Descrição",
    "verification_code": "Código de verificação",
    "verification_hint": "Confirme o código antes de pagar: ele deve ser o mesmo que {merchant} "
    "lhe informou.",
    "verification_hint_plain": "Confirme o código antes de pagar: ele deve ser o mesmo que "
    "lhe informaram com o link.",
    "valid_until": "Válido até",
    "brasilia_time": "horário de Brasília",
    "status_open": "Aguardando pagamento",
    "status_paid": "Pago",
    "sandbox_note": "Ambiente de testes (sandbox): nenhum dinheiro real é movimentado.",
    "choose_method": "Escolha como pagar",
    "pix_heading": "Pagar com Pix",
    "pix_how": "No app do seu banco, escolha pagar com Pix e leia o QR code, ou copie o código "
    "abaixo (Pix Copia e Cola).",
    "pix_check_payee": "Antes de confirmar, veja no app do banco se o nome de quem recebe é o "
    "de {merchant}. Se for outro, não pague.",
    "pix_check_payee_plain": "Antes de confirmar, veja no app do banco se o nome de quem recebe "
    "é o de quem lhe enviou o link. Se for outro, não pague.",
    "qr_label": "QR code Pix de {amount}",
    "pix_code_label": "Código Pix Copia e Cola",
    "copy_pix_code": "Copiar código PIX",
    "copied": "Código Pix copiado.",
    "copy_failed": "Não foi possível copiar: selecione o código e copie-o.",
    "pix_waiting": "Esta página mostra o comprovante assim que o pagamento for confirmado.",
    "pix_on_its_way": "O código Pix está sendo gerado pelo banco do recebedor. Atualize a página "
    "em alguns instantes, ou pague com cartão.",
    "pix_refresh": "Já paguei: atualizar a página",
    "simulate_pix": "Simular pagamento PIX",
    "card_heading": "Pagar com cartão de crédito",
    "card_number": "Número do cartão",
    "card_holder": "Nome impresso no cartão",
    "card_expiry": "Validade (MM/AA)",
    "card_security_code": "Código de segurança (CVV)",
    "installments": "Parcelas",
    "installments_note": "Quando o valor não se divide em partes iguais, os centavos que sobram "
    "vão na 1ª parcela.",
    "pay": "Pagar",
    "card_brand": "Bandeira: {brand}",
    "test_cards": "Cartões de teste: 4242\u00a04242\u00a04242\u00a04242 (aprovado), "
    "4000\u00a00000\u00a00000\u00a00002 (recusado), 4000\u00a00000\u00a00000\u00a09995 (saldo "
    "insuficiente); qualquer validade futura e CVV.",
    "form_problems": "Confira os campos destacados.",
    "number_missing": "Informe o número do cartão.",
    "number_invalid": "Número de cartão inválido: confira os dígitos.",
    "holder_missing": "Informe o nome como está impresso no cartão.",
    "holder_invalid": "Use só letras e espaços, como no cartão.",
    "expiry_invalid": "Informe a validade como MM/AA, por exemplo 08/29.",
    "expiry_past": "Este cartão está vencido.",
    "expiry_too_far": "Confira o ano da validade: ele está mais de 20 anos à frente.",
    "security_code_invalid": "O código de segurança tem {digits} dígitos.",
    "installments_invalid": "Escolha uma das opções de parcelamento.",
    "DECLINED": "Pagamento recusado pelo emissor do cartão. Use outro cartão ou pague com Pix.",
    "INSUFFICIENT_FUNDS": "Pagamento recusado: limite ou saldo insuficiente. Use outro cartão "
    "ou pague com Pix.",
    "PROCESSING_ERROR": "Não foi possível processar o pagamento. Nada foi cobrado; tente de novo "
    "em instantes.",
    "card_locked": "Pagamento com cartão bloqueado após 5 tentativas recusadas. Tente de novo "
    "depois das {hour} (horário de Brasília) ou pague com Pix.",
    "card_in_progress": "Um pagamento com cartão deste link já está em andamento. Aguarde e "
    "atualize a página.",
    "card_attempts_address": "Muitos pagamentos com cartão foram recusados a partir desta "
    "conexão na última hora. Por segurança, tente de novo depois das {hour} (horário de "
    "Brasília) ou pague com Pix.",
    "card_attempts_card": "Este cartão foi recusado muitas vezes na última hora. Por segurança, "
    "ele só pode ser usado de novo depois das {hour} (horário de Brasília). Use outro cartão ou "
    "pague com Pix.",
    "no_methods": "Nenhuma forma de pagamento está disponível para este link agora. Fale com "
    "quem lhe enviou o link.",
    "receipt_heading": "Pagamento aprovado",
    "receipt_method": "Forma de pagamento",
    "receipt_date": "Data",
    "receipt_id": "Comprovante",
    "receipt_installments": "Parcelas",
    "receipt_amount": "Valor pago",
    "method_pix": "Pix",
    "method_card": "Cartão de crédito {brand} final {last4}",
    "method_card_plain": "Cartão de crédito",
    "one_installment": "À vista (1x de {amount})",
    "equal_installments": "{n}x de {amount}",
    "unequal_installments": "{n}x: 1ª de {first} e {rest_n}x de {rest}",
    "receipt_keep": "Guarde este comprovante. O pagamento já foi informado a {merchant}.",
    "status_refunded": "Reembolsado",
    "refunded_full": "Reembolsado integralmente",
    "refunded_partly": "Reembolsado parcialmente",
    "refund_in_progress": "Reembolso em processamento",
    "refunded_total": "Total reembolsado",
    "refund_succeeded": "{amount} em {date} (horário de Brasília)",
    "refund_pending": "{amount}: reembolso em processamento",
    "refund_to_card": "O valor reembolsado volta ao cartão usado no pagamento.",
    "refund_to_pix": "O valor reembolsado volta à conta de onde saiu o Pix.",
    "status_cancelled": "Cancelado",
    "cancelled_heading": "Link de pagamento cancelado",
    "cancelled_text": "{merchant} cancelou este link de pagamento. Ele não pode mais ser pago.",
    "cancelled_text_plain": "Quem lhe enviou este link de pagamento o cancelou. Ele não pode "
    "mais ser pago.",
    "cancelled_nothing_charged": "Nada foi cobrado. Se ainda precisar pagar, peça um novo link a "
    "quem lhe enviou este.",
    "not_found_title": "Link inválido",
    "not_found_heading": "Link de pagamento não encontrado",
    "not_found_text": "Confira se o endereço foi copiado por inteiro, ou peça o link novamente a "
    "quem o enviou.",
    "expired_title": "Link expirado",
    "expired_heading": "Este link de pagamento expirou",
    "expired_text": "Peça um novo link a quem lhe enviou este.",
    "forbidden_title": "Página expirada",
    "forbidden_heading": "Esta página expirou",
    "forbidden_text": "Por segurança, o pagamento não foi enviado. Volte ao link de pagamento, "
    "atualize a página e tente de novo.",
    "unavailable_title": "Forma de pagamento indisponível",
    "unavailable_heading": "Esta forma de pagamento não está disponível",
    "unavailable_text": "Volte ao link de pagamento e escolha outra forma de pagar.",
    "invalid_form_title": "Formulário inválido",
    "invalid_form_heading": "Não foi possível ler o formulário",
    "invalid_form_text": "Nada foi cobrado. Volte ao link de pagamento e tente de novo.",
    "back_to_link": "Voltar ao link de pagamento",
    "footer": "Pagamento processado por Tucano.",
}

EN: Mapping[str, str] = {
    "page_title": "Payment of {amount}",
    "charge_from": "Payment request from {merchant}",
    "payer": "Payer",
    "payee": "Payee",
    "amount": "Amount",
    "description": "Description",
    "verification_code": "Verification code",
    "verification_hint": "Check the code before you pay: it must be the one {merchant} gave you.",
    "verification_hint_plain": "Check the code before you pay: it must be the one you were "
    "given with the link.",
    "valid_until": "Valid until",
    "brasilia_time": "Brasília time",
    "status_open": "Awaiting payment",
    "status_paid": "Paid",
    "sandbox_note": "Test environment (sandbox): no real money moves.",
    "choose_method": "Choose how to pay",
    "pix_heading": "Pay with Pix",
    "pix_how": "In your bank's app, choose to pay with Pix and scan the QR code, or copy the code "
    "below (Pix Copia e Cola).",
    "pix_check_payee": "Before you confirm, check in your bank's app that the payee's name is "
    "{merchant}'s. If it is another, do not pay.",
    "pix_check_payee_plain": "Before you confirm, check in your bank's app that the payee's name "
    "is that of whoever sent you the link. If it is another, do not pay.",
    "qr_label": "Pix QR code for {amount}",
    "pix_code_label": "Pix copy-and-paste code",
    "copy_pix_code": "Copy Pix code",
    "copied": "Pix code copied.",
    "copy_failed": "Could not copy: select the code and copy it.",
    "pix_waiting": "This page shows the receipt as soon as the payment is confirmed.",
    "pix_on_its_way": "The receiver's bank is preparing the Pix code. Refresh the page in a "
    "moment, or pay by card.",
    "pix_refresh": "I have paid: refresh the page",
    "simulate_pix": "Simulate Pix payment",
    "card_heading": "Pay by credit card",
    "card_number": "Card number",
    "card_holder": "Name on card",
    "card_expiry": "Expiry date (MM/YY)",
    "card_security_code": "Security code (CVV)",
    "installments": "Installments",
    "installments_note": "When the amount does not split into equal parts, the cents left over "
    "go on the 1st installment.",
    "pay": "Pay",
    "card_brand": "Brand: {brand}",
    "test_cards": "Test cards: 4242\u00a04242\u00a04242\u00a04242 (approved), "
    "4000\u00a00000\u00a00000\u00a00002 (declined), 4000\u00a00000\u00a00000\u00a09995 "
    "(insufficient funds); any future expiry and CVV.",
    "form_problems": "Check the highlighted fields.",
    "number_missing": "Enter the card number.",
    "number_invalid": "This card number is not valid: check its digits.",
    "holder_missing": "Enter the name as printed on the card.",
    "holder_invalid": "Use letters and spaces only, as on the card.",
    "expiry_invalid": "Enter the expiry date as MM/YY, for example 08/29.",
    "expiry_past": "This card has expired.",
    "expiry_too_far": "Check the expiry year: it is more than 20 years ahead.",
    "security_code_invalid": "The security code has {digits} digits.",
    "installments_invalid": "Choose one of the installment options.",
    "DECLINED": "The card issuer declined the payment. Use another card or pay with Pix.",
    "INSUFFICIENT_FUNDS": "Payment declined: insufficient funds or credit limit. Use another "
    "card or pay with Pix.",
    "PROCESSING_ERROR": "The payment could not be processed. Nothing was charged; try again in "
    "a moment.",
    "card_locked": "Card payment is locked after 5 declined attempts. Try again after {hour} "
    "(Brasília time) or pay with Pix.",
    "card_in_progress": "A card payment of this link is already in progress. Wait a moment and "
    "refresh the page.",
    "card_attempts_address": "Too many card payments from this connection were declined in the "
    "last hour. For your security, try again after {hour} (Brasília time) or pay with Pix.",
    "card_attempts_card": "This card was declined too many times in the last hour. For your "
    "security, it can be used again after {hour} (Brasília time). Use another card or pay with "
    "Pix.",
    "no_methods": "No payment method is available for this link right now. Contact whoever "
    "sent you the link.",
    "receipt_heading": "Payment approved",
    "receipt_method": "Payment method",
    "receipt_date": "Date",
    "receipt_id": "Receipt",
    "receipt_installments": "Installments",
    "receipt_amount": "Amount paid",
    "method_pix": "Pix",
    "method_card": "{brand} credit card ending {last4}",
    "method_card_plain": "Credit card",
    "one_installment": "Single payment (1x of {amount})",
    "equal_installments": "{n}x of {amount}",
    "unequal_installments": "{n}x: 1st of {first} and {rest_n}x of {rest}",
    "receipt_keep": "Keep this receipt. {merchant} has been told of the payment.",
    "status_refunded": "Refunded",
    "refunded_full": "Refunded in full",
    "refunded_partly": "Partly refunded",
    "refund_in_progress": "Refund in progress",
    "refunded_total": "Total refunded",
    "refund_succeeded": "{amount} on {date} (Brasília time)",
    "refund_pending": "{amount}: refund in progress",
    "refund_to_card": "The amount refunded goes back to the card used to pay.",
    "refund_to_pix": "The amount refunded goes back to the account the Pix came from.",
    "status_cancelled": "Cancelled",
    "cancelled_heading": "Payment link cancelled",
    "cancelled_text": "{merchant} cancelled this payment link. It can no longer be paid.",
    "cancelled_text_plain": "Whoever sent you this payment link cancelled it. It can no longer "
    "be paid.",
    "cancelled_nothing_charged": "Nothing was charged. If you still need to pay, ask whoever sent "
    "you this link for a new one.",
    "not_found_title": "Invalid link",
    "not_found_heading": "Payment link not found",
    "not_found_text": "Check that the whole address was copied, or ask whoever sent the link for "
    "it again.",
    "expired_title": "Link expired",
    "expired_heading": "This payment link has expired",
    "expired_text": "Ask whoever sent you this link for a new one.",
    "forbidden_title": "Page expired",
    "forbidden_heading": "This page has expired",
    "forbidden_text": "For your security the payment was not sent. Go back to the payment link, "
    "refresh the page and try again.",
    "unavailable_title": "Payment method unavailable",
    "unavailable_heading": "This payment method is not available",
    "unavailable_text": "Go back to the payment link and choose another way to pay.",
    "invalid_form_title": "Invalid form",
    "invalid_form_heading": "The form could not be read",
    "invalid_form_text": "Nothing was charged. Go back to the payment link and try again.",
    "back_to_link": "Back to the payment link",
    "footer": "Payment processed by Tucano.",
}

TEXTS: Mapping[Language, Mapping[str, str]] = {"pt-BR": PT, "en": EN}
