"""Agent runtime: tools, approvals, suspensions, supervisors, stores and models."""

from ._calls import Expiry, Refusal, Remark, StandingApproval, StandingAsk
from ._engine import DEFAULT_LEASE
from .agent import Agent
from .chunks import (
    AgentResult,
    Chunk,
    ErrorChunk,
    FinishChunk,
    PendingInfo,
    TextDeltaChunk,
    ToolCallApprovalChunk,
    ToolCallChunk,
    ToolCallGrantedChunk,
    ToolCallSuspendedChunk,
    ToolErrorChunk,
    ToolResultChunk,
)
from .errors import (
    AgentError,
    AlreadyDecidedError,
    ApprovalExpiredError,
    ArgsInvalidError,
    CallExpiredError,
    ResumeDataInvalidError,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    SuspendPayloadInvalidError,
    ToolCallNotPendingError,
)
from .messages import Message, TextPart, ToolCallPart, ToolResultPart
from .models.base import Model, ModelError, Reachable
from .models.demo import DEMO_HELP, DEMO_REQUESTS, DemoModel
from .models.function import FunctionModel, ModelResponse, ToolCall
from .runs import ExpiredCall, RecoveredRun, StoppedRun
from .snapshot import AuditEntry, Decision, PendingCall, RunSnapshot, StopRequest
from .spec import AgentOptions, AgentSpec
from .stores import (
    LockTimeout,
    MemoryStore,
    Pruned,
    Store,
    StoreConflict,
    open_store,
    run_id_for,
)
from .stream import AgentStream
from .tools import Tool, ToolContext, ToolSource, tool
from .usage import Usage

__all__ = [
    "DEFAULT_LEASE",
    "DEMO_HELP",
    "DEMO_REQUESTS",
    "Agent",
    "AgentError",
    "AgentOptions",
    "AgentResult",
    "AgentSpec",
    "AgentStream",
    "AlreadyDecidedError",
    "ApprovalExpiredError",
    "ArgsInvalidError",
    "AuditEntry",
    "CallExpiredError",
    "Chunk",
    "Decision",
    "DemoModel",
    "ErrorChunk",
    "ExpiredCall",
    "Expiry",
    "FinishChunk",
    "FunctionModel",
    "LockTimeout",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "PendingCall",
    "PendingInfo",
    "Pruned",
    "Reachable",
    "RecoveredRun",
    "Refusal",
    "Remark",
    "ResumeDataInvalidError",
    "RunChangedError",
    "RunNotFoundError",
    "RunNotPausedError",
    "RunSnapshot",
    "StandingApproval",
    "StandingAsk",
    "StopRequest",
    "StoppedRun",
    "Store",
    "StoreConflict",
    "SuspendPayloadInvalidError",
    "TextDeltaChunk",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallApprovalChunk",
    "ToolCallChunk",
    "ToolCallGrantedChunk",
    "ToolCallNotPendingError",
    "ToolCallPart",
    "ToolCallSuspendedChunk",
    "ToolContext",
    "ToolErrorChunk",
    "ToolResultChunk",
    "ToolResultPart",
    "ToolSource",
    "Usage",
    "open_store",
    "run_id_for",
    "tool",
]
