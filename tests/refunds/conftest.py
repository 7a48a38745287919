from __future__ import annotations

import pytest

from tests.support.service import Merchant, RunningService


@pytest.fixture
async def merchant(service: RunningService) -> Merchant:
    return await service.merchant()
