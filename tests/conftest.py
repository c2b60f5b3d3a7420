"""Suite-wide guards (no real model request, no OAuth mode in Slack), and Claude faked
at the Messages API for any test that asks for it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

import agents.models._guard as model_guard
from agents.models.anthropic import AnthropicModel
from tests.models.fake_anthropic import FakeAnthropic

model_guard.ALLOW_MODEL_REQUESTS = False
for _name in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "ANTHROPIC_API_KEY"):
    os.environ.pop(_name, None)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    """A local server speaking the Messages API, scripted by each test."""
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def claude(fake: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    """The Anthropic model, through the real SDK, pointed at ``fake``."""
    model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=1, timeout=5.0)
    yield model
    await model.aclose()
