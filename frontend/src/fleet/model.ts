// The fleet as the API and the websocket send it (webapp/fleet/selectors.py), and the pure helpers
// the page uses to show it: durations, filters, owner text.

export interface FleetOwner {
  kind: "rl" | "annotation" | "flywheel" | "other";
  id: number | null;
  label: string;
  url: string | null;
}

export interface FleetLease {
  lease_id: string;
  owner: FleetOwner;
  owner_raw: string;
  task: string;
  age_s: number;
  expires_in_s: number;
}

export interface FleetEnv {
  env_id: string;
  kind: string;
  host: string;
  state: string;
  health: string;
  health_reason: string;
  boot_s: number | null;
  age_s: number | null;
  lease: FleetLease | null;
  watchable: boolean;
}

export interface FleetHost {
  name: string;
  alive: boolean;
  heartbeat_age_s: number | null;
  envs: number;
  leased: number;
  kinds: string[];
}

/** One Celery queue: messages waiting in the broker, the oldest one's wait, who consumes it. */
export interface FleetQueue {
  queue: string;
  depth: number;
  oldest_wait_s: number | null;
  workers: string[];
  concurrency: number;
}

export interface Fleet {
  now: number;
  hosts: FleetHost[];
  envs: FleetEnv[];
  counts: Record<string, number>;
  queues: FleetQueue[];
}

export interface FleetSnapshotEvent {
  type: string; // "fleet.snapshot"
  reason: string;
  fleet: Fleet;
}

/** "4 s", "3 min 5 s", "2 h 10 min", "3 d 4 h"; "—" for null. */
export function duration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  if (s < 86400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ""}`;
}

export interface FleetFilter {
  kind: string; // "" = any
  owner: string; // "" = any, "free" = not leased, else an owner kind
  problems: boolean; // only unhealthy envs
}

export function filterEnvs(envs: readonly FleetEnv[], f: FleetFilter): FleetEnv[] {
  return envs.filter((e) => {
    if (f.kind !== "" && e.kind !== f.kind) return false;
    if (f.owner === "free" && e.lease !== null) return false;
    if (f.owner !== "" && f.owner !== "free" && e.lease?.owner.kind !== f.owner) return false;
    if (f.problems && e.health === "ok") return false;
    return true;
  });
}

const OWNER_WORDS: Record<FleetOwner["kind"], string> = {
  rl: "RL run",
  annotation: "Annotation",
  flywheel: "Flywheel job",
  other: "Other",
};

export function ownerKindLabel(kind: FleetOwner["kind"]): string {
  return OWNER_WORDS[kind];
}

/** The env kinds present, sorted (for the filter). */
export function kindsOf(envs: readonly FleetEnv[]): string[] {
  return [...new Set(envs.map((e) => e.kind))].sort();
}

/** A queue's state in words: "idle", "3 waiting, oldest 12 s", or a warning when nobody consumes it. */
export function queueState(q: FleetQueue): { text: string; tone: "completed" | "running" | "failed" } {
  if (q.workers.length === 0) return { text: q.depth > 0 ? `${q.depth} waiting and no worker` : "no worker", tone: q.depth > 0 ? "failed" : "running" };
  if (q.depth === 0) return { text: "idle", tone: "completed" };
  return { text: `${q.depth} waiting, oldest ${duration(q.oldest_wait_s)}`, tone: "running" };
}
