// Pure reducers for the session state: server snapshots, websocket events and decision answers can
// arrive in any order, so every update checks the observation version it belongs to.

import type { CandidatesEvent, ObservationEvent, SessionState, StatusEvent } from "./types";

const SETTLED = new Set(["ready", "failed"]);

/** A full state from the server (GET, decide answer, websocket snapshot) merged into the one shown.
 *  An older observation never replaces a newer one, and settled candidates of the current
 *  observation are not turned back into "pending" by a snapshot taken before they arrived. */
export function mergeState(current: SessionState | null, incoming: SessionState): SessionState {
  if (current === null || current.id !== incoming.id) return incoming;
  const have = current.observation.obs_version;
  const got = incoming.observation.obs_version;
  if (got < have) {
    // A late snapshot of an older screen: only its status may be news (e.g. submitted).
    return incoming.status !== current.status ? { ...current, status: incoming.status, error: incoming.error } : current;
  }
  if (
    got === have &&
    current.candidates.obs_version === have &&
    SETTLED.has(current.candidates.status) &&
    !(incoming.candidates.obs_version === have && SETTLED.has(incoming.candidates.status))
  ) {
    return { ...incoming, candidates: current.candidates };
  }
  return incoming;
}

export interface ObservationUpdate {
  state: SessionState;
  /** The step count differs from the timeline shown: ask the server for the full state. */
  refetch: boolean;
  changed: boolean;
}

export function applyObservation(state: SessionState, event: ObservationEvent): ObservationUpdate {
  if (event.obs_version <= state.observation.obs_version) {
    return { state, refetch: event.steps !== state.steps.length && event.obs_version === state.observation.obs_version, changed: false };
  }
  const next: SessionState = {
    ...state,
    task: { ...state.task, instruction: event.instruction || state.task.instruction },
    observation: {
      obs_version: event.obs_version,
      screenshot_url: event.screenshot_url,
      width: event.width,
      height: event.height,
      clock: event.clock,
      reward: event.reward,
      env_done: event.env_done,
    },
    candidates: { obs_version: event.obs_version, status: "pending", items: [], error: "", model_ms: null },
  };
  return { state: next, refetch: event.steps !== state.steps.length, changed: true };
}

export function applyCandidates(state: SessionState, event: CandidatesEvent): SessionState {
  if (event.obs_version !== state.observation.obs_version) return state; // for another screen
  return {
    ...state,
    candidates: {
      obs_version: event.obs_version,
      status: event.status,
      items: event.status === "ready" ? event.candidates : [],
      error: event.error,
      model_ms: event.model_ms,
    },
  };
}

export function applyStatus(state: SessionState, event: StatusEvent): SessionState {
  return { ...state, status: event.status, error: event.error };
}

/** Can the annotator still decide on this state? */
export function canDecide(state: SessionState): boolean {
  return state.status === "active" && !state.observation.env_done;
}
