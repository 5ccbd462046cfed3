"""The domain model (docs/architecture.md), one module per noun."""

from governance.models.audit import AuditCheckpoint, AuditEntry, ErasureGrant
from governance.models.credentials import AgentKey, PersonalAccessToken
from governance.models.evaluations import EvaluationRun, EvaluationStatus
from governance.models.facts import Fact, ProjectFactsGeneration, Supersession, Tombstone
from governance.models.feed import FeedDelivery, FeedEvent, WebhookEndpoint
from governance.models.jobs import Job
from governance.models.policies import ChangeApproval, PolicyDraft, PolicyVersion
from governance.models.projects import Agent, Membership, Principal, Project
from governance.models.retrievals import CandidateRecord, RetrievalEvent, RetrievalFeedback
from governance.models.sessions import Session, SessionBlock
from governance.models.writes import ReviewDecision, Write

__all__ = [
    "Agent",
    "AgentKey",
    "AuditCheckpoint",
    "AuditEntry",
    "CandidateRecord",
    "ChangeApproval",
    "ErasureGrant",
    "EvaluationRun",
    "EvaluationStatus",
    "Fact",
    "FeedDelivery",
    "FeedEvent",
    "Job",
    "Membership",
    "PersonalAccessToken",
    "PolicyDraft",
    "PolicyVersion",
    "Principal",
    "Project",
    "ProjectFactsGeneration",
    "RetrievalEvent",
    "RetrievalFeedback",
    "ReviewDecision",
    "Session",
    "SessionBlock",
    "Supersession",
    "Tombstone",
    "WebhookEndpoint",
    "Write",
]
