"""Writes of the annotation loop: sessions, decisions, candidate requests (issue 5; the proposals
themselves are computed on a worker: annotation.proposals)."""

from annotation.services.candidates import candidates_request
from annotation.services.common import SessionConflict, session_abandon, session_reap_abandoned
from annotation.services.decisions import DecisionInvalid, session_decide
from annotation.services.sessions import session_heartbeat, session_start, session_submit

__all__ = [
    "DecisionInvalid",
    "SessionConflict",
    "candidates_request",
    "session_abandon",
    "session_decide",
    "session_heartbeat",
    "session_reap_abandoned",
    "session_start",
    "session_submit",
]
