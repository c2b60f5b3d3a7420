"""Token usage, summed over the model requests of a run."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    """Tokens used by model requests."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
        )
