// /workspace/: the annotator's sessions (resume an active one) and "take the next task".

import { api } from "../lib/api";
import { badge, h, notice, render, table } from "../lib/dom";
import { ago, measuredRate } from "../lib/format";
import { takeNextTask } from "./next";
import type { SessionSummary } from "./types";

interface QueuedAssignment {
  id: number;
  task: number;
  task_external_id: string;
  instruction: string;
  env_kind: string;
  pool_name: string;
  success_rate: number;
  attempts: number;
  track: string;
  status: string;
}

/** The annotator's queue: tasks the current model fails most first; start any, or skip one. */
async function mountQueue(box: HTMLElement, error: HTMLElement): Promise<void> {
  let queue: QueuedAssignment[];
  try {
    queue = await api<QueuedAssignment[]>("/api/annotation/assignments/");
  } catch (e) {
    render(box, notice("error", e instanceof Error ? e.message : String(e)));
    return;
  }
  if (queue.length === 0) {
    render(box, notice("empty", "Nothing is assigned to you. Ask an admin to assign you a task pool."));
    return;
  }
  render(
    box,
    h(
      "div",
      { class: "table-wrap" },
      table(queue, [
        { label: "Task", cell: (a) => h("span", { title: a.instruction }, a.task_external_id) },
        { label: "Instruction", cell: (a) => (a.instruction.length > 90 ? `${a.instruction.slice(0, 90)}…` : a.instruction) },
        { label: "Pool", cell: (a) => a.pool_name },
        { label: "Kind", cell: (a) => a.env_kind },
        { label: "Track", cell: (a) => badge(a.track, a.track === "novice" ? "queued" : "running") },
        {
          label: "Model success",
          cell: (a) =>
            h("span", { title: a.attempts > 0 ? "share of the finished episodes of this task that succeeded" : "no episode of this task has finished yet" }, measuredRate(a.success_rate, a.attempts)),
          numeric: true,
        },
        {
          label: "",
          cell: (a) => {
            const start = h("button", { type: "button", class: "btn btn-small", "data-testid": `start-${a.task}` }, a.status === "in_progress" ? "Continue" : "Start");
            start.addEventListener("click", () => void takeNextTask(start, error, a.task));
            const skip = h("button", { type: "button", class: "btn btn-small btn-secondary", title: "Take this task out of your queue" }, "Skip");
            skip.addEventListener("click", () => {
              skip.disabled = true;
              api(`/api/annotation/assignments/${a.id}/skip/`, { method: "POST", body: {} })
                .then(() => mountQueue(box, error))
                .catch((e: unknown) => {
                  error.textContent = e instanceof Error ? e.message : String(e);
                  error.hidden = false;
                  skip.disabled = false;
                });
            });
            return h("span", { class: "row-actions" }, start, " ", skip);
          },
        },
      ]),
    ),
  );
}

interface FixRow {
  trajectory_id: number;
  task: string;
  instruction: string;
  pool: string;
  review_round: number;
  flagged_steps: number[];
  decided_at: string | null;
}

/** The trajectories the reviewers sent back: each opens the fix view at its first flagged step. */
async function mountFixes(box: HTMLElement): Promise<void> {
  let rows: FixRow[];
  try {
    rows = await api<FixRow[]>("/api/annotation/fixes/");
  } catch (e) {
    render(box, notice("error", `Could not load the trajectories sent back: ${e instanceof Error ? e.message : String(e)}`));
    return;
  }
  if (rows.length === 0) return;
  render(
    box,
    h("h2", {}, "Sent back for fixes"),
    h("p", { class: "notice notice-warn" }, `The reviewers asked you to fix ${rows.length} trajector${rows.length === 1 ? "y" : "ies"}: read their comments per step, edit, resubmit.`),
    h(
      "div",
      { class: "table-wrap" },
      table(rows, [
        { label: "Trajectory", cell: (r) => `#${r.trajectory_id}` },
        { label: "Task", cell: (r) => h("span", { title: r.instruction }, r.task) },
        { label: "Pool", cell: (r) => r.pool },
        { label: "Flagged steps", cell: (r) => (r.flagged_steps.length > 0 ? r.flagged_steps.map((i) => i + 1).join(", ") : "—") },
        { label: "Sent back", cell: (r) => ago(r.decided_at) },
        {
          label: "",
          cell: (r) => {
            const first = r.flagged_steps[0];
            return h("a", { class: "btn btn-small", href: `/workspace/fix/${r.trajectory_id}/${first !== undefined ? `?step=${first + 1}` : ""}`, "data-testid": `fix-${r.trajectory_id}` }, "Fix");
          },
        },
      ]),
    ),
  );
}

export async function mountStart(root: HTMLElement): Promise<void> {
  const error = h("div", { class: "notice notice-error", role: "alert", hidden: true, "data-testid": "start-error" });
  const next = h("button", { type: "button", class: "btn", "data-testid": "take-next" }, "Take the next task");
  next.addEventListener("click", () => void takeNextTask(next, error));
  const list = h("div", { "data-testid": "my-sessions" }, notice("loading", "Loading your sessions…"));
  const queue = h("div", { "data-testid": "my-queue" }, notice("loading", "Loading your queue…"));
  const fixes = h("div", { "data-testid": "my-fixes" });
  render(
    root,
    h("div", { class: "ws-start" }, next, h("span", { class: "muted" }, "The task the current model fails most goes first; the environment starts in a few seconds.")),
    error,
    fixes,
    h("h2", {}, "Your queue"),
    queue,
    h("h2", {}, "Your sessions"),
    list,
  );
  void mountQueue(queue, error);
  void mountFixes(fixes);
  let sessions: SessionSummary[];
  try {
    sessions = await api<SessionSummary[]>("/api/annotation/sessions/");
  } catch (e) {
    render(list, notice("error", e instanceof Error ? e.message : String(e)));
    return;
  }
  if (sessions.length === 0) {
    render(list, notice("empty", "No sessions yet. Take the next task to start."));
    return;
  }
  const active = sessions.filter((s) => s.status === "active");
  render(
    list,
    active.length > 0 ? h("p", { class: "notice notice-info" }, `${active.length} active session${active.length === 1 ? "" : "s"}: resume where you left off.`) : null,
    h(
      "div",
      { class: "table-wrap" },
      table(sessions, [
        { label: "Session", cell: (s) => h("a", { href: `/workspace/${s.id}/` }, `#${s.id}`) },
        { label: "Task", cell: (s) => s.task },
        { label: "Pool", cell: (s) => s.pool },
        { label: "Status", cell: (s) => badge(s.status, s.status === "active" ? "running" : s.status === "submitted" ? "succeeded" : "failed") },
        { label: "Steps", cell: (s) => s.steps, numeric: true },
        { label: "Started", cell: (s) => ago(s.created_at) },
        { label: "", cell: (s) => (s.status === "active" ? h("a", { class: "btn btn-small", href: `/workspace/${s.id}/` }, "Resume") : h("a", { href: `/workspace/${s.id}/` }, "Open")) },
      ]),
    ),
  );
}
