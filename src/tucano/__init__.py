"""Tucano: a payments API for Brazil (signed webhooks, payment links paid by card or PIX)."""

__version__ = "0.1.0"
