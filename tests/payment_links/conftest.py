from __future__ import annotations

import pytest

from tests.helpers import Merchant, RunningService


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()
