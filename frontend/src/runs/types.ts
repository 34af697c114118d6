// Shapes of the run API (rl_control/api) and the run websocket (rl_control/events.py).

export type XAxis = "step" | "version" | "samples" | "wall";
export const X_AXES: readonly XAxis[] = ["step", "version", "samples", "wall"];
export const X_LABELS: Record<XAxis, string> = {
  step: "training step",
  version: "policy version",
  samples: "samples",
  wall: "wall time (s)",
};

export interface RunAlerts {
  count: number;
  last_kind: string | null;
  last_step: number | null;
}

export interface RunRow {
  id: number;
  name: string;
  status: string;
  algorithm: string;
  mode: string;
  variant: string;
  preset: string;
  pool: number | null;
  pool_name: string | null;
  parent: number | null;
  start_checkpoint: string | null;
  created_by: string | null;
  error: string;
  updates_done: number;
  episodes_done: number;
  policy_version: number;
  samples: number;
  headline_success: number | null;
  progress: number | null;
  alerts: RunAlerts;
  /** Why a running run waits (train worker, rollout slot, environment); null when nothing holds it back. */
  wait_reason: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface RunDetail extends RunRow {
  config: Record<string, unknown>;
  latest_metrics: Record<string, { step: number; value: number }>;
  alert_settings: Record<string, number>;
  /** The weights key each external policy endpoint must be started with ([] for a run serving itself). */
  endpoint_keys?: { url: string; key: string }[];
}

export interface Series {
  name: string;
  x: number[];
  y: number[];
  total: number;
  last: { x: number; y: number } | null;
}

export interface SeriesResponse {
  run_id: number;
  x: XAxis;
  points: number;
  series: Series[];
}

export interface AlertRow {
  id: number;
  kind: string;
  step: number;
  value: number;
  threshold: number;
  message: string;
  created_at: string;
}

export interface Preset {
  name: string;
  title: string;
  description: string;
  algorithm: string;
  mode: string;
  /** the start model these defaults are for: embedded, hf_vlm or endpoint */
  start_profile?: string;
  config: Record<string, unknown>; // the full run config (its fields: the config schema)
  notes: Record<string, string>; // per field, what this deployment adds to its help
}

export interface CatalogueRow {
  name: string;
  group: string;
  description: string;
  keyed: boolean;
}

export interface EpisodeRow {
  id: number;
  task: string;
  status: string;
  final_reward: number | null;
  validation: number | null;
  num_steps: number;
  policy_version: string;
  best_step_reward?: number | null;
  created_at: string;
}

export interface CheckpointRow {
  id: number;
  version: string;
  path: string;
  metrics: Record<string, unknown>;
  is_annotation_model: boolean;
  is_rl_start?: boolean;
  success_note?: string;
  created_at: string;
}

export interface FleetLease {
  lease_id: string;
  env_id: string;
  kind: string;
  task: string;
  state: string;
  boot_s: number | null;
  watchable?: boolean;
  worker?: string;
  acquired_at?: string;
  ended_at?: string | null;
}

export interface Fleet {
  run_id: number;
  live: FleetLease[];
  ended: FleetLease[];
  counts: Record<string, number>;
  fleet_idle: number;
  boot_s_mean: number | null;
  wait_reason: string | null;
}

export interface StatusEvent {
  type: "run.status";
  run_id: number;
  status: string;
  error: string;
  updates_done: number;
  episodes_done: number;
  policy_version: number;
  samples: number;
  headline_success: number | null;
}

export interface MetricsEvent {
  type: "run.metrics";
  run_id: number;
  step: number;
  policy_version: number;
  samples: number;
  wall: number;
  values: Record<string, number>;
}

export interface AlertEvent {
  type: "run.alert";
  run_id: number;
  alert_id: number;
  kind: string;
  step: number;
  value: number;
  threshold: number;
  message: string;
}

export type RunEvent = StatusEvent | MetricsEvent | AlertEvent;

export interface ReplayStep {
  index: number;
  thought: string;
  action_text: string;
  parse_error: string;
  screen_actions: import("../lib/trajectory").ActionJson[];
  screenshot_url: string;
  screen_width: number | null;
  screen_height: number | null;
  reward: number;
  done: boolean;
  policy_version: string;
  rl: Record<string, unknown>;
}

export interface Replay {
  id: number;
  task: string;
  instruction: string;
  source: string;
  env_kind: string;
  status: string;
  final_reward: number | null;
  validation: number | null;
  policy_version: string;
  run_id: number | null;
  annotator: string;
  num_steps: number;
  judge: JudgeVerdict | null;
  steps: ReplayStep[];
}

/** The LLM judge's verdict on an episode: as its RL reward, or as its V(s). */
export interface JudgeVerdict {
  role: "reward" | "validation";
  success: boolean;
  reason: string;
  correct_steps: number | null;
  model: string;
  raw: string;
  env_reward: number | null;
}
