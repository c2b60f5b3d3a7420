"""Suite-wide guards: no real model request, no OAuth mode in Slack."""

from __future__ import annotations

import os

import agents.models._guard as model_guard

model_guard.ALLOW_MODEL_REQUESTS = False
for _name in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "ANTHROPIC_API_KEY"):
    os.environ.pop(_name, None)
