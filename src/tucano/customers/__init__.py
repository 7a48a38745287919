"""Customers (merchants) as the operator describes them: the profile the checkout shows."""
