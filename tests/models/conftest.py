"""Fixtures of the model tests: a fake Anthropic API, and Claude pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agents.models.anthropic import AnthropicModel

from .fake_anthropic import FakeAnthropic


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
