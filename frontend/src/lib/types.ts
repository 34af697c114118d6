// Shapes of the REST API responses the pages read (webapp/store/api/serializers.py).

export type Role = "annotator" | "reviewer" | "researcher" | "admin";

export interface PageNumberPage<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export interface CursorPage<T> {
  next: string | null;
  previous: string | null;
  results: T[];
}

export interface Pool {
  id: number;
  name: string;
  description: string;
  candidates_n: number;
  validation_mode: string;
  task_count: number;
  created_at: string;
}

export interface Task {
  id: number;
  pool: string;
  external_id: string;
  instruction: string;
  env_kind: string;
  source: string;
  difficulty: number;
  importance: number;
  tags: string[];
  enabled: boolean;
  supported: boolean;
  /** Why the task cannot run here (set by the importer when `supported` is false). */
  unsupported_reasons?: string[];
  attempts: number;
  successes: number;
  success_rate: number;
}

export interface Trajectory {
  id: number;
  task: string;
  task_id: number;
  pool: string;
  instruction: string;
  env_kind: string;
  source: string;
  checkpoint: string | null;
  policy_version: string;
  annotator: string | null;
  status: string;
  final_reward: number | null;
  validation: number | null;
  validator: string;
  route: string;
  review_state: string;
  num_steps: number;
  created_at: string;
  finished_at: string | null;
}

export interface Checkpoint {
  id: number;
  version: string;
  parent: string | null;
  path: string;
  run: number | null;
  notes: string;
  is_annotation_model: boolean;
  created_at: string;
}

export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export interface ExportJob {
  id: number;
  created_by: string;
  format: string;
  filters: Record<string, unknown>;
  status: JobStatus;
  progress: number;
  total_trajectories: number;
  done_trajectories: number;
  error: string;
  download_url: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** The websocket event of ws/export-jobs/<id>/ (webapp/store/events.py ExportJobProgress). */
export interface ExportProgressEvent {
  type: "export.progress";
  job_id: number;
  status: JobStatus;
  progress: number;
  done_trajectories: number;
  total_trajectories: number;
  error: string;
}
