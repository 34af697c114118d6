// Formatting of numbers and times for tables.

export function percent(fraction: number | null | undefined, digits = 0): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "—";
  return `${(fraction * 100).toFixed(digits)} %`;
}

/** A task's measured success: "—" until an episode of it has finished, else "50 % of 12". */
export function measuredRate(rate: number, attempts: number): string {
  return attempts > 0 ? `${percent(rate)} of ${attempts}` : "—";
}

export function reward(value: number | null): string {
  return value === null ? "—" : value.toFixed(2);
}

export function validation(value: number | null): string {
  if (value === null) return "not validated";
  return value === 1 ? "V = 1" : "V = 0";
}

/** "just now", "5 min ago", "3 h ago", "2 d ago", else the date (ISO, no locale surprises). */
export function ago(iso: string | null, now: Date = new Date()): string {
  if (iso === null) return "—";
  const then = new Date(iso);
  if (Number.isNaN(then.getTime())) return "—";
  const seconds = Math.max(0, (now.getTime() - then.getTime()) / 1000);
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  if (seconds < 30 * 86400) return `${Math.floor(seconds / 86400)} d ago`;
  return then.toISOString().slice(0, 10);
}

export function truncate(text: string, max = 80): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** What a step or a chosen candidate is called on every page (docs/annotation.md "Numbering"): the
 *  API stores 0-based indices and adds the 1-based `number` / `decision_number` the user sees; older
 *  answers without them get the same numbers from the indices. */
export interface Numbered {
  index: number;
  number?: number;
  decision?: string;
  decision_index?: number | null;
  decision_number?: number | null;
}

export function stepNumber(step: Numbered): number {
  return step.number ?? step.index + 1;
}

export function decisionNumber(step: Numbered): number | null {
  if (step.decision_number !== undefined) return step.decision_number;
  return step.decision_index === null || step.decision_index === undefined ? null : step.decision_index + 1;
}

/** "accepted 2", "edited 1", "overridden", "takeover": the step's decision with its candidate's number. */
export function decisionLabel(step: Numbered): string {
  const n = decisionNumber(step);
  const what = step.decision ?? "";
  return (what === "accepted" || what === "edited") && n !== null ? `${what} ${n}` : what;
}

/** "p 62 %", "p 0.4 %", "p < 0.1 %": the model's probability of a candidate, readable at a glance. */
export function probabilityText(p: number): string {
  const percent = p * 100;
  if (percent >= 10) return `p ${percent.toFixed(0)} %`;
  if (percent >= 0.1) return `p ${percent.toFixed(1)} %`;
  return "p < 0.1 %";
}
