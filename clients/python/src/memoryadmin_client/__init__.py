"""Python client for the governed-memory agent API.

from memoryadmin_client import Client

with Client("http://localhost:8000", api_key) as memory:
    result = memory.write(principal="user-42", statement="Prefers email over phone calls.")
    context = memory.retrieve(principal="user-42", query="how to contact").context
"""

from memoryadmin_client.client import AsyncClient, Client
from memoryadmin_client.errors import (
    APIError,
    BadRequest,
    Conflict,
    Forbidden,
    MemoryAdminError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
)
from memoryadmin_client.models import (
    Candidate,
    Fact,
    FactDetail,
    FactRef,
    FactSource,
    Finding,
    KeyInfo,
    Memories,
    Memory,
    Retrieval,
    RetrievalEvent,
    RetrievedItem,
    SessionEnd,
    Source,
    Withdrawal,
    Write,
    WriteResult,
)

__all__ = [
    "APIError",
    "AsyncClient",
    "BadRequest",
    "Candidate",
    "Client",
    "Conflict",
    "Fact",
    "FactDetail",
    "FactRef",
    "FactSource",
    "Finding",
    "Forbidden",
    "KeyInfo",
    "Memories",
    "Memory",
    "MemoryAdminError",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "Retrieval",
    "RetrievalEvent",
    "RetrievedItem",
    "ServiceUnavailable",
    "SessionEnd",
    "Source",
    "TransportError",
    "Unauthorized",
    "Withdrawal",
    "Write",
    "WriteResult",
]
