"""The bundled example: an ops team's assistant over a real SQLite database.

``build_agent(model, store)`` returns the ``ops`` supervisor (the bot's default
``BOT_AGENT``). Its sub-agents, each a small module to copy from:

- ``records``: ``find_user``, ``delete_record`` (always needs approval);
- ``deploy``: ``deploy_service`` (production needs approval; asks for a missing
  version and resumes from the reply);
- ``billing``: ``refund`` (over 100 needs approval; never more than the order).
"""

from .agent import build_agent
from .billing import billing_agent
from .database import DEFAULT_DB_PATH, OpsDatabase, default_db_path
from .deploy import deploy_agent
from .records import records_agent

__all__ = [
    "DEFAULT_DB_PATH",
    "OpsDatabase",
    "billing_agent",
    "build_agent",
    "default_db_path",
    "deploy_agent",
    "records_agent",
]
