"""GET /metrics as `tucano serve` and `tucano worker` answer it: exposition (the page, who may
read it) and, for the worker, which has no HTTP server of its own, server (an aiohttp one).
What is measured is recorded where it happens: tucano.core.metrics."""
