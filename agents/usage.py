"""Token usage, summed over the model requests of a run."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    """Tokens used by model requests."""

    input_tokens: int = 0
    """Input tokens read neither from nor into the prompt cache."""
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    """Input tokens read from the prompt cache (billed at a fraction)."""
    cache_write_tokens: int = 0
    """Input tokens written into the prompt cache."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )
