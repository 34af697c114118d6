// The reviewer's draft (a verdict and comment per step, an overall verdict) and the checks the
// server makes on submit, run here first so the page can say what is missing. Pure functions.

import type { StepVerdict, Verdict } from "./types";
import type { ActionJson } from "../lib/trajectory";

export interface StepDraft {
  verdict: Verdict | null;
  comment: string;
  /** With "fix": the corrected action, UI-TARS grammar in screen pixels (optional). */
  actionText: string;
}

export interface Draft {
  steps: Map<number, StepDraft>;
  verdict: Verdict | null;
  comment: string;
}

export function newDraft(stepIndices: readonly number[]): Draft {
  return {
    steps: new Map(stepIndices.map((i) => [i, { verdict: null, comment: "", actionText: "" }])),
    verdict: null,
    comment: "",
  };
}

/** The overall verdict the steps suggest: any reject → reject, any fix → fix, all approved → approve. */
export function suggestedVerdict(draft: Draft): Verdict | null {
  const verdicts = [...draft.steps.values()].map((s) => s.verdict);
  if (verdicts.some((v) => v === null)) return null;
  if (verdicts.includes("reject")) return "reject";
  if (verdicts.includes("fix")) return "fix";
  return "approve";
}

/** What still stops the draft from being submitted (empty when it can be). */
export function draftProblems(draft: Draft): string[] {
  const problems: string[] = [];
  const undecided = [...draft.steps].filter(([, s]) => s.verdict === null).map(([i]) => i + 1);
  if (undecided.length > 0) problems.push(`Give a verdict for step ${undecided.join(", ")}.`);
  const unexplained = [...draft.steps]
    .filter(([, s]) => s.verdict !== null && s.verdict !== "approve" && s.comment.trim() === "")
    .map(([i]) => i + 1);
  if (unexplained.length > 0) problems.push(`Say why in a comment on step ${unexplained.join(", ")}.`);
  if (draft.verdict === null) problems.push("Choose the overall verdict.");
  const flagged = [...draft.steps.values()].some((s) => s.verdict === "fix" || s.verdict === "reject");
  if (draft.verdict === "approve" && flagged) {
    problems.push("A trajectory with steps marked fix or reject cannot be approved.");
  }
  return problems;
}

/** The body of `POST /api/review/reviews/<id>/submit/`. */
export function submitBody(draft: Draft): { verdict: Verdict; comment: string; step_verdicts: StepVerdict[] } {
  if (draft.verdict === null) throw new Error("no overall verdict");
  const stepVerdicts: StepVerdict[] = [];
  for (const [index, s] of [...draft.steps].sort((a, b) => a[0] - b[0])) {
    if (s.verdict === null) throw new Error(`step ${index} has no verdict`);
    const item: StepVerdict = { index, verdict: s.verdict, comment: s.comment.trim() };
    if (s.verdict === "fix" && s.actionText.trim() !== "") item.action_text = s.actionText.trim();
    stepVerdicts.push(item);
  }
  return { verdict: draft.verdict, comment: draft.comment.trim(), step_verdicts: stepVerdicts };
}

/** A short line describing one action, e.g. `click (80, 120)`, `type “hello⏎”`. */
export function describeAction(a: Pick<ActionJson, "kind" | "point" | "end_point" | "text" | "keys" | "direction">): string {
  const at = (p: [number, number]): string => `(${Math.round(p[0])}, ${Math.round(p[1])})`;
  let out = a.kind;
  if (a.point) out += ` ${at(a.point)}`;
  if (a.end_point) out += ` → ${at(a.end_point)}`;
  if (a.direction) out += ` ${a.direction}`;
  if (a.keys) out += ` ${a.keys.join("+")}`;
  if (a.text !== undefined) out += ` “${a.text.replace(/\n/g, "⏎")}”`;
  return out;
}

/** A click the reviewer made on the screenshot, as a corrected action in screen pixels. */
export function clickText(point: readonly [number, number]): string {
  return `click(start_box='(${Math.round(point[0])},${Math.round(point[1])})')`;
}

/** The first `(x,y)` point of a corrected action's text, for drawing it (null if none). */
export function fixPoint(actionText: string): [number, number] | null {
  const m = /\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)/.exec(actionText);
  if (m === null) return null;
  return [Number(m[1]), Number(m[2])];
}
