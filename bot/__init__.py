"""The chat-neutral core: threads, routing, approval policy, views, server and CLI.

Adapters import from here; ``bot`` itself imports only the public API of
``agents`` (and, in ``bot/__main__.py`` alone, the adapters it wires in).
"""

from .chat_state import (
    CardPlace,
    ChatState,
    MemoryChatState,
    ThreadNote,
    ask_of,
    open_chat_state,
)
from .core import ChatBot
from .inputs import has_lone_surrogate, is_loopback_url
from .intake import Overloaded
from .metrics import Metrics
from .policy import ApprovalPolicy, PolicyError
from .port import ChatCore
from .server import Adapter, build_app
from .settings import (
    DEFAULT_AGENT,
    ENV_CONFIG,
    CheckedSettings,
    Settings,
    SettingsError,
    load_from_env,
    load_settings,
)
from .tasks import TaskTracker
from .types import (
    ApprovalCard,
    CardPointer,
    CardStatus,
    Click,
    ClickAction,
    ClickResult,
    Destination,
    FieldKind,
    Inbox,
    InboxDecision,
    IncomingMessage,
    MessageRef,
    Messenger,
    Notice,
    Person,
    Posted,
    Prompt,
    PromptField,
    PromptStatus,
    Reply,
    Text,
    ThreadKey,
    Undeliverable,
    View,
    naming,
    plain_text,
    tool_label,
)

__all__ = [
    "DEFAULT_AGENT",
    "ENV_CONFIG",
    "Adapter",
    "ApprovalCard",
    "ApprovalPolicy",
    "CardPlace",
    "CardPointer",
    "CardStatus",
    "ChatBot",
    "ChatCore",
    "ChatState",
    "CheckedSettings",
    "Click",
    "ClickAction",
    "ClickResult",
    "Destination",
    "FieldKind",
    "Inbox",
    "InboxDecision",
    "IncomingMessage",
    "MemoryChatState",
    "MessageRef",
    "Messenger",
    "Metrics",
    "Notice",
    "Overloaded",
    "Person",
    "PolicyError",
    "Posted",
    "Prompt",
    "PromptField",
    "PromptStatus",
    "Reply",
    "Settings",
    "SettingsError",
    "TaskTracker",
    "Text",
    "ThreadKey",
    "ThreadNote",
    "Undeliverable",
    "View",
    "ask_of",
    "build_app",
    "has_lone_surrogate",
    "is_loopback_url",
    "load_from_env",
    "load_settings",
    "naming",
    "open_chat_state",
    "plain_text",
    "tool_label",
]
