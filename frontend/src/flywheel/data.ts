// Flywheel page data (from the server-rendered JSON and /api/flywheel/) and pure helpers.

export interface CheckpointView {
  id: number;
  version: string;
  parent: string | null;
  metrics: Record<string, unknown>;
  is_annotation_model: boolean;
}

export interface DatasetView {
  id: number;
  version: number;
  name: string;
  sft: number;
  ct: number;
  prefixes: number;
  v1_rate: number | null;
  created_at: string;
}

export interface JobView {
  id: number;
  kind: string;
  status: string;
  progress: number;
  done_units: number;
  total_units: number;
  result: Record<string, unknown>;
  error: string;
  checkpoint: string | null;
  created_at: string;
}

export interface V1Point {
  checkpoint: string;
  n: number;
  v1: number;
  rate: number;
}

export interface DifficultyView {
  pool: { id: number; name: string };
  buckets: Record<string, number>;
  tasks: { external_id: string; rate: number; attempts: number; bucket: string; weight: number }[];
  history: { id: number; created_at: string; buckets: Record<string, number>; mean_success: number }[];
}

export interface FlywheelData {
  annotation_model: CheckpointView | null;
  datasets: DatasetView[];
  v1_by_checkpoint: V1Point[];
  jobs: JobView[];
  difficulty: DifficultyView | null;
}

export const BUCKETS = ["0-25", "25-50", "50-75", "75-100"] as const;

/** "0.5, 0.5" → [0.5, 0.5]; throws a readable error unless every α ≥ 0 and Σ α = 1 (±1e-6). */
export function parseWeights(text: string, count: number): number[] {
  const parts = text.split(",").map((p) => p.trim()).filter((p) => p !== "");
  if (parts.length !== count) throw new Error(`${count} checkpoints need ${count} weights, got ${parts.length}`);
  const weights = parts.map(Number);
  if (weights.some((w) => !Number.isFinite(w) || w < 0)) throw new Error("weights must be numbers ≥ 0");
  const sum = weights.reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 1) > 1e-6) throw new Error(`weights must sum to 1, they sum to ${sum.toFixed(4)}`);
  return weights;
}

/** Cumulative SFT / CT sizes per dataset version (datasets are snapshots, so growth = their sizes). */
export function growth(datasets: readonly DatasetView[]): { label: string; sft: number; ct: number }[] {
  return [...datasets]
    .sort((a, b) => a.version - b.version)
    .map((d) => ({ label: `v${d.version}`, sft: d.sft, ct: d.ct }));
}

export function isTerminal(status: string): boolean {
  return status === "succeeded" || status === "failed" || status === "cancelled";
}

/** Every bucket present (missing ones as 0), in curriculum order. */
export function bucketCounts(buckets: Record<string, number>): { bucket: string; count: number }[] {
  return BUCKETS.map((bucket) => ({ bucket, count: buckets[bucket] ?? 0 }));
}
