"""Example agents bundled with the bot; ``examples.ops`` is the default ``BOT_AGENT``.

Read them as documentation by example: how to write tools (schemas from
signatures, approval rules, suspensions, idempotency keys), sub-agents, and the
supervisor that delegates to them.
"""
