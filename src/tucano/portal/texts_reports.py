"""What the portal's reports page says, in Portuguese (Brazil) and English (merged into texts.py's
catalogue). `Download CSV` is decisions.md's name."""

from __future__ import annotations

from collections.abc import Mapping

PT: Mapping[str, str] = {
    "rp_heading": "Relatórios",
    "rp_period": "Links criados de {start} a {end} (dias de Brasília).",
    "rp_totals": "Totais",
    "rp_total_count": "Links",
    "rp_total_amount": "Valor dos links",
    "rp_refunded_amount": "Reembolsado",
    "rp_by_status": "Por situação",
    "rp_by_status_caption": "Links por situação",
    "rp_by_method": "Por forma de pagamento",
    "rp_by_method_caption": "Links pagos, por forma de pagamento",
    "rp_col_status": "Situação",
    "rp_col_method": "Forma de pagamento",
    "rp_col_count": "Quantidade",
    "rp_col_amount": "Valor",
    "rp_col_refunded": "Reembolsado",
    "rp_col_day": "Dia",
    "rp_by_day": "Valor por dia",
    "rp_chart_title": "Valor dos links criados por dia",
    "rp_chart_desc": "Gráfico de barras, um dia por barra, de {start} a {end}; o maior valor é "
    "{top}. A tabela a seguir tem os mesmos números.",
    "rp_chart_empty": "Nenhum link no período.",
    "rp_days_caption": "Links criados por dia",
    "rp_csv": "Planilha (CSV)",
    "rp_csv_text": "Os links destes filtros, um por linha, com pagamento e reembolsos.",
    "rp_csv_format": "Formato",
    "rp_csv_excel_br": "Excel em português (; e vírgula decimal)",
    "rp_csv_rfc4180": "RFC 4180 (, e ponto decimal)",
    "rp_download_csv": "Baixar CSV",
}

EN: Mapping[str, str] = {
    "rp_heading": "Reports",
    "rp_period": "Links created from {start} to {end} (Brasília's days).",
    "rp_totals": "Totals",
    "rp_total_count": "Links",
    "rp_total_amount": "Amount of the links",
    "rp_refunded_amount": "Refunded",
    "rp_by_status": "By status",
    "rp_by_status_caption": "Links by status",
    "rp_by_method": "By payment method",
    "rp_by_method_caption": "Paid links, by payment method",
    "rp_col_status": "Status",
    "rp_col_method": "Payment method",
    "rp_col_count": "Count",
    "rp_col_amount": "Amount",
    "rp_col_refunded": "Refunded",
    "rp_col_day": "Day",
    "rp_by_day": "Amount per day",
    "rp_chart_title": "Amount of the links created per day",
    "rp_chart_desc": "Bar chart, one bar a day, from {start} to {end}; the highest amount is "
    "{top}. The table below has the same figures.",
    "rp_chart_empty": "No link in the period.",
    "rp_days_caption": "Links created per day",
    "rp_csv": "Spreadsheet (CSV)",
    "rp_csv_text": "These filters' links, one a row, with their payment and refunds.",
    "rp_csv_format": "Format",
    "rp_csv_excel_br": "Excel in Portuguese (; and a decimal comma)",
    "rp_csv_rfc4180": "RFC 4180 (, and a decimal point)",
    "rp_download_csv": "Download CSV",
}
