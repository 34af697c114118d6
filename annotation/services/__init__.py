"""Writes of the annotation loop: sessions, decisions, candidate proposals (issue 5)."""

from annotation.services.candidates import candidates_propose, candidates_request
from annotation.services.decisions import DecisionInvalid, session_decide
from annotation.services.sessions import (
    SessionConflict,
    session_abandon,
    session_heartbeat,
    session_reap_abandoned,
    session_start,
    session_submit,
)

__all__ = [
    "DecisionInvalid",
    "SessionConflict",
    "candidates_propose",
    "candidates_request",
    "session_abandon",
    "session_decide",
    "session_heartbeat",
    "session_reap_abandoned",
    "session_start",
    "session_submit",
]
