// Pure helpers of the run charts: grouping metric names, smoothing, live appends, aligning several
// series on one x axis (uPlot wants one shared x array), and the config form's values.

import type { MetricsEvent, XAxis } from "./types";

export const GROUP_ORDER = ["outcome", "policy", "value", "efficiency", "curation", "fleet"] as const;

/** Keyed metrics (a name under a prefix + key) are drawn together, one chart per prefix. */
export const KEYED_PREFIXES = [
  "outcome/success_rate/task/",
  "outcome/success_rate/domain/",
  "curation/rollouts_per_task/",
  "curation/bucket/",
] as const;

export interface ChartSpec {
  /** Chart id: the metric name, or a keyed prefix. */
  id: string;
  group: string;
  title: string;
  names: string[];
}

function keyedPrefix(name: string): string | null {
  for (const p of KEYED_PREFIXES) if (name.startsWith(p) && name.length > p.length) return p;
  return null;
}

/** One chart per plain metric, one per keyed prefix; grouped in GROUP_ORDER then by name. */
export function chartSpecs(names: readonly string[]): Map<string, ChartSpec[]> {
  const byId = new Map<string, ChartSpec>();
  for (const name of [...names].sort()) {
    const prefix = keyedPrefix(name);
    const id = prefix ?? name;
    const group = name.split("/", 1)[0] ?? "other";
    const spec = byId.get(id) ?? { id, group, title: prefix ? `${prefix}*` : name, names: [] };
    spec.names.push(name);
    byId.set(id, spec);
  }
  const groups = new Map<string, ChartSpec[]>();
  const order = [...GROUP_ORDER, ...new Set([...byId.values()].map((s) => s.group))];
  for (const group of order) {
    if (groups.has(group)) continue;
    const specs = [...byId.values()].filter((s) => s.group === group);
    if (specs.length > 0) groups.set(group, specs);
  }
  return groups;
}

/** The x of a live metrics event on the chosen axis. */
export function eventX(event: MetricsEvent, axis: XAxis): number {
  if (axis === "version") return event.policy_version;
  if (axis === "samples") return event.samples;
  if (axis === "wall") return event.wall;
  return event.step;
}

/** Exponential moving average with TensorBoard's debiasing; weight 0 = raw. Nulls stay gaps. */
export function smooth(ys: readonly (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) return [...ys];
  let last = 0;
  let n = 0;
  return ys.map((y) => {
    if (y === null || !Number.isFinite(y)) return null;
    last = last * weight + (1 - weight) * y;
    n += 1;
    return last / (1 - weight ** n);
  });
}

/** A series as the chart holds it: points in x order. */
export interface Points {
  x: number[];
  y: number[];
}

/** Insert (x, y) keeping x order (live points nearly always go at the end). */
export function appendPoint(points: Points, x: number, y: number): void {
  let i = points.x.length;
  while (i > 0 && (points.x[i - 1] ?? 0) > x) i -= 1;
  points.x.splice(i, 0, x);
  points.y.splice(i, 0, y);
}

/** uPlot data for several series: the union of their xs, each y null where it has no point. */
export function align(series: readonly Points[]): [number[], ...(number | null)[][]] {
  const xs = [...new Set(series.flatMap((s) => s.x))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const ys = series.map((s) => {
    const out: (number | null)[] = new Array<number | null>(xs.length).fill(null);
    s.x.forEach((x, i) => {
      const at = index.get(x);
      if (at !== undefined) out[at] = s.y[i] ?? null;
    });
    return out;
  });
  return [xs, ...ys];
}

// ----------------------------------------------------------------------------- launch form

/** {"section.field": value} of a config (lists and nulls are leaves). */
export function flattenConfig(config: Record<string, unknown>, prefix = ""): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, value] of Object.entries(config)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      for (const [k, v] of flattenConfig(value as Record<string, unknown>, name)) out.set(k, v);
    } else {
      out.set(name, value);
    }
  }
  return out;
}

/** What a form input holds for `value`, and back: numbers, booleans, null (empty), lists as JSON. */
export function fieldText(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return JSON.stringify(value);
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

export function parseField(text: string, like: unknown): unknown {
  const t = text.trim();
  if (t === "") return Array.isArray(like) ? [] : typeof like === "string" ? "" : null; // an emptied text field stays text
  if (typeof like === "boolean") return t === "true";
  if (Array.isArray(like) || t.startsWith("[")) {
    try {
      return JSON.parse(t) as unknown;
    } catch {
      return t; // the server says what is wrong with it
    }
  }
  if (typeof like === "number" || like === null) {
    const n = Number(t);
    if (t !== "" && Number.isFinite(n)) return n;
  }
  return t;
}

/** Only the fields whose value differs from the preset's, nested again: the run's overrides. */
export function overrides(preset: Map<string, unknown>, values: Map<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of values) {
    if (JSON.stringify(value) === JSON.stringify(preset.get(key))) continue;
    const parts = key.split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = (node[part] ?? {}) as Record<string, unknown>;
      node[part] = next;
      node = next;
    }
    node[parts[parts.length - 1] ?? key] = value;
  }
  return out;
}

/** A shaded stretch of the x axis: an Entropulse SFT phase between two RL phases. */
export interface Band {
  from: number;
  to: number;
  label: string;
}

export const PHASE_METRIC = "policy/entropulse_phases";

/** SFT phases from the Entropulse phase counter: each increase of the count is one SFT phase, run
 * between the previous point and the one that reports it (so it spans that interval on any axis). */
export function phaseBands(points: Points): Band[] {
  const bands: Band[] = [];
  for (let i = 0; i < points.x.length; i += 1) {
    const y = points.y[i] ?? 0;
    const before = i > 0 ? (points.y[i - 1] ?? 0) : 0;
    if (y > before) {
      const x = points.x[i] ?? 0;
      const prev = i > 0 ? (points.x[i - 1] ?? x - 1) : x - 1;
      bands.push({ from: prev, to: x, label: `SFT ${Math.round(y)}` });
    }
  }
  return bands;
}

export const PRETRAIN_METRIC = "value/pretraining";
export const PRETRAIN_UPDATES_METRIC = "value/pretrain_updates";

/** What a PPO run's trainer is doing, from its latest value/pretraining and value/pretrain_updates:
 * "value pre-training 40/100" while the critic warms up on a fixed policy (the policy version stays),
 * then "policy updates"; before the first update "waiting for the first batch". "" for GRPO. */
export function trainingPhase(algorithm: string, pretraining: number | undefined, updates: number | undefined, cap: number | undefined): string {
  if (algorithm !== "ppo") return "";
  if (pretraining === undefined) return "waiting for the first batch";
  if (pretraining >= 1) return `value pre-training ${String(updates ?? 0)}/${cap === undefined ? "?" : String(cap)}`;
  return "policy updates";
}
