"""The callers of the events endpoints: a merchant, and the provider's system that publishes."""

from __future__ import annotations

import pytest

from tests.support.service import Merchant, RunningService
from tucano.auth.tokens import Scope


@pytest.fixture
async def merchant(delivery_service: RunningService) -> Merchant:
    return await delivery_service.merchant()


@pytest.fixture
async def publisher(delivery_service: RunningService) -> Merchant:
    """The provider's own system that raises events (scope events.publish)."""
    return await delivery_service.merchant(scopes=[Scope.EVENTS_PUBLISH])
