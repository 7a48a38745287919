"""What the portal's webhook pages say beyond the list (texts.py): creating, editing, deleting,
the signing secret and test events, in Portuguese (Brazil) and English. `Create webhook`,
`Rotate secret` and `Send test event` are the names decisions.md fixes."""

from __future__ import annotations

from collections.abc import Mapping

PT: Mapping[str, str] = {
    "wh_create": "Criar webhook",
    "wh_new_intro": "O Tucano envia (POST) cada evento do tipo escolhido para a URL de destino, "
    "assinado com o segredo do webhook (Standard Webhooks).",
    "wh_field_target_url": "URL de destino",
    "wh_hint_target_url_sandbox": "Um endereço https público (no sandbox, http também serve).",
    "wh_hint_target_url": "Um endereço https público.",
    "wh_field_event_type": "Tipo de evento",
    "wh_choose_event_type": "Escolha um tipo",
    "wh_field_active": "Ativo: entregar eventos a ele",
    "wh_errors": "O webhook não foi salvo: confira o que está indicado abaixo.",
    "wh_error_url_missing": "Informe a URL de destino.",
    "wh_error_url_refused": "Esta URL não pode receber webhooks:",
    "wh_error_event_type": "Escolha um dos tipos de evento.",
    "wh_error_limit": "Este cliente já tem o máximo de webhooks permitido ({limit}): exclua um "
    "antes de criar outro.",
    "wh_cancel": "Cancelar",
    "wh_back": "Voltar aos webhooks",
    "wh_heading": "Webhook {webhook_id}",
    "wh_facts": "Dados do webhook",
    "wh_deactivated_by_tucano": "Desativado pelo Tucano em {time}:",
    "wh_edit_heading": "Editar",
    "wh_save": "Salvar alterações",
    "wh_secret_heading": "Segredo de assinatura",
    "wh_secret_intro": "Seu receptor confere a assinatura de cada entrega com este segredo. Ele "
    "só aparece quando você pede, e nunca na lista.",
    "wh_reveal": "Mostrar segredo",
    "wh_secret_label": "Segredo de assinatura atual",
    "wh_secret_note": "Guarde-o como uma senha: ele sai da tela quando você deixa esta página.",
    "wh_copy": "Copiar",
    "wh_copied": "Segredo copiado.",
    "wh_copy_failed": "Segredo selecionado: copie com Ctrl+C (⌘C no Mac).",
    "wh_previous_until": "Um segredo substituído por uma troca também assina as entregas até "
    "{time} (horário de Brasília).",
    "wh_rotate": "Trocar segredo",
    "wh_rotate_heading": "Trocar o segredo de assinatura?",
    "wh_rotate_text": "Um novo segredo passa a assinar as entregas. O atual continua assinando ao "
    "lado dele por 24 horas, para o seu receptor passar ao novo sem perder nenhuma entrega.",
    "wh_rotated": "Segredo trocado. Este é o novo; o anterior continua assinando as entregas ao "
    "lado dele por 24 horas, até {time} (horário de Brasília).",
    "wh_test_heading": "Evento de teste",
    "wh_test_intro": "Envia um evento {event_type} de exemplo, assinado, a todos os seus "
    "webhooks ativos desse tipo, este incluído. Só no sandbox.",
    "wh_field_variant": "Variante",
    "wh_send_test": "Enviar evento de teste",
    "wh_test_inactive": "Ative este webhook para enviar a ele um evento de teste.",
    "wh_delete_heading": "Excluir",
    "wh_delete": "Excluir webhook",
    "wh_delete_confirm": "Excluir este webhook?",
    "wh_delete_text": "{url} não recebe mais eventos, e as entregas que ainda esperam para ser "
    "enviadas a ele são canceladas. Não dá para desfazer.",
    "wh_done_created": "Webhook criado. Mostre o segredo de assinatura abaixo para conferir as "
    "assinaturas das entregas.",
    "wh_done_updated": "Alterações salvas.",
    "wh_done_deleted": "Webhook excluído.",
    "wh_done_test_sent": "Evento de teste {event_id} enviado aos seus webhooks ativos de "
    "{event_type}.",
}

EN: Mapping[str, str] = {
    "wh_create": "Create webhook",
    "wh_new_intro": "Tucano POSTs each event of the type you choose to the target URL, signed "
    "with the webhook's secret (Standard Webhooks).",
    "wh_field_target_url": "Target URL",
    "wh_hint_target_url_sandbox": "A public https address (in the sandbox, http will do too).",
    "wh_hint_target_url": "A public https address.",
    "wh_field_event_type": "Event type",
    "wh_choose_event_type": "Choose a type",
    "wh_field_active": "Active: deliver events to it",
    "wh_errors": "The webhook was not saved: check what is marked below.",
    "wh_error_url_missing": "Enter the target URL.",
    "wh_error_url_refused": "This URL cannot receive webhooks:",
    "wh_error_event_type": "Choose one of the event types.",
    "wh_error_limit": "This customer already has the most webhooks allowed ({limit}): delete "
    "one before creating another.",
    "wh_cancel": "Cancel",
    "wh_back": "Back to the webhooks",
    "wh_heading": "Webhook {webhook_id}",
    "wh_facts": "The webhook",
    "wh_deactivated_by_tucano": "Deactivated by Tucano on {time}:",
    "wh_edit_heading": "Edit",
    "wh_save": "Save changes",
    "wh_secret_heading": "Signing secret",
    "wh_secret_intro": "Your receiver checks each delivery's signature with this secret. It is "
    "shown only when you ask, and never in the list.",
    "wh_reveal": "Reveal secret",
    "wh_secret_label": "Current signing secret",
    "wh_secret_note": "Keep it as you would a password: it leaves the screen when you leave this "
    "page.",
    "wh_copy": "Copy",
    "wh_copied": "Secret copied.",
    "wh_copy_failed": "Secret selected: copy it with Ctrl+C (⌘C on a Mac).",
    "wh_previous_until": "A secret replaced by a rotation also signs deliveries until {time} "
    "(Brasília time).",
    "wh_rotate": "Rotate secret",
    "wh_rotate_heading": "Rotate the signing secret?",
    "wh_rotate_text": "A new secret signs deliveries from now on. The current one keeps signing "
    "beside it for 24 hours, so your receiver can move to the new one without missing a "
    "delivery.",
    "wh_rotated": "Secret rotated. This is the new one; the old one keeps signing deliveries "
    "beside it for 24 hours, until {time} (Brasília time).",
    "wh_test_heading": "Test event",
    "wh_test_intro": "Sends a sample {event_type} event, signed, to every active webhook of "
    "yours of that type, this one included. Sandbox only.",
    "wh_field_variant": "Variant",
    "wh_send_test": "Send test event",
    "wh_test_inactive": "Activate this webhook to send it a test event.",
    "wh_delete_heading": "Delete",
    "wh_delete": "Delete webhook",
    "wh_delete_confirm": "Delete this webhook?",
    "wh_delete_text": "{url} gets no more events, and deliveries still waiting to be sent to it "
    "are cancelled. This cannot be undone.",
    "wh_done_created": "Webhook created. Reveal its signing secret below to check the "
    "signatures of its deliveries.",
    "wh_done_updated": "Changes saved.",
    "wh_done_deleted": "Webhook deleted.",
    "wh_done_test_sent": "Test event {event_id} sent to your active {event_type} webhooks.",
}
