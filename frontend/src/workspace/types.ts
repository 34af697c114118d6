// Shapes of the annotation API and websocket (docs/annotation.md, annotation/selectors.py, events.py).

import type { ActionJson, StepBase, TaskBrief } from "../lib/trajectory";
import type { ThinkAloudEvent } from "./thinkaloud";

export type { ActionJson } from "../lib/trajectory";

/** created, active, submitted, abandoned (review states may follow). */
export type SessionStatus = string;
export type CandidatesStatus = "pending" | "ready" | "failed" | "none";

export interface Candidate {
  index: number;
  thought: string;
  action_text: string;
  raw_text: string;
  actions: ActionJson[];
  /** The same actions in the screen's own pixels (observation width × height). */
  screen_actions: ActionJson[];
  /** A point of the candidate lies outside the screen: it cannot be accepted as it is. */
  clamped: boolean;
  /** Why the candidate cannot be executed as it is (e.g. "… outside the screen …"). */
  error?: string;
  parse_error: string;
  logprob: number | null;
  /** The model's probability of this answer (exp of `logprob`); absent on older records. */
  probability?: number | null;
  /** The model's own top (greedy) answer. */
  greedy?: boolean;
  model_version: string;
  convention: string;
  image_size: [number, number] | null;
}

export interface Observation {
  obs_version: number;
  screenshot_url: string;
  width: number;
  height: number;
  clock: number;
  reward: number;
  env_done: boolean;
}

export interface Candidates {
  obs_version: number;
  status: CandidatesStatus;
  items: Candidate[];
  error: string;
  model_ms: number | null;
}

export interface StepRecord extends StepBase {
  executed_points: [number, number][];
  reward: number;
  clock_start: number;
  clock_end: number;
  human_thought_verbatim: string;
  human_thought_refined: string;
}

/** What the task came to once the session is closed: the trajectory's stored result (the same
 *  number review and export show). */
export interface SessionResult {
  final_reward: number | null;
  success: boolean | null;
  status: string;
  review_state: string;
}

export interface SessionState {
  id: number;
  status: SessionStatus;
  error: string;
  /** The episode's own instruction (read from the environment at reset), when it gave one. */
  instruction?: string;
  /** null while active; set once finished (docs/annotation.md "Result after Finish"). */
  result?: SessionResult | null;
  task: TaskBrief & { instruction: string };
  trajectory_id: number | null;
  track: string;
  policy: { model: string; profile: string; n: number; measured?: string };
  observation: Observation;
  candidates: Candidates;
  steps: StepRecord[];
}

export interface SessionSummary {
  id: number;
  status: SessionStatus;
  task: string;
  pool: string;
  steps: number;
  created_at: string;
}

export interface DecideResult {
  step: number;
  done: boolean;
  reward: number;
  /** Present when the session's home is full: the message to show. */
  disk_full?: string;
  state: SessionState;
}

export interface VncGrant {
  url: string;
  token: string;
  read_only: boolean;
  expires_in_s: number;
}

export type DecisionKind = "accept" | "edit" | "override" | "finish" | "infeasible" | "call_user";

export interface Decision {
  kind: DecisionKind;
  obs_version: number;
  index?: number;
  thought?: string;
  action_text?: string;
  convention?: string;
  answer?: string;
  time_taken_ms?: number;
  takeover?: boolean;
}

export interface ObservationEvent {
  type: "annotation.observation";
  obs_version: number;
  screenshot_url: string;
  width: number;
  height: number;
  clock: number;
  instruction: string;
  steps: number;
  reward: number;
  env_done: boolean;
}

export interface CandidatesEvent {
  type: "annotation.candidates";
  obs_version: number;
  status: CandidatesStatus;
  candidates: Candidate[];
  error: string;
  model_ms: number | null;
}

export interface StatusEvent {
  type: "annotation.status";
  status: SessionStatus;
  error: string;
}

export type ServerMessage =
  | { type: "annotation.state"; state: SessionState }
  | ObservationEvent
  | CandidatesEvent
  | StatusEvent
  | ThinkAloudEvent
  | { type: "heartbeat"; lease: string }
  | { type: "error"; detail: string };
