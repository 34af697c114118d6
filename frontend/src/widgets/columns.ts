// Table columns of the entities the pages list.

import { badge, h, type Column } from "../lib/dom";
import { ago, percent, reward, truncate, validation } from "../lib/format";
import type { Checkpoint, Pool, Task, Trajectory } from "../lib/types";

export function rateBar(fraction: number): HTMLElement {
  const clamped = Math.min(1, Math.max(0, fraction));
  return h(
    "span",
    { class: "rate", title: percent(fraction, 1) },
    h("span", { class: "rate-track" }, h("span", { class: "rate-fill", style: `width:${(clamped * 100).toFixed(1)}%` })),
    h("span", { class: "rate-text" }, percent(fraction)),
  );
}

export const taskColumns: readonly Column<Task>[] = [
  { label: "Task", cell: (t) => h("code", {}, t.external_id) },
  { label: "Instruction", cell: (t) => h("span", { title: t.instruction }, truncate(t.instruction, 90)) },
  { label: "Pool", cell: (t) => t.pool },
  { label: "Env", cell: (t) => t.env_kind },
  { label: "Success", cell: (t) => rateBar(t.success_rate) },
  { label: "Attempts", cell: (t) => t.attempts, numeric: true },
  { label: "Difficulty", cell: (t) => t.difficulty.toFixed(2), numeric: true },
  {
    label: "State",
    cell: (t) => (!t.supported ? badge("unsupported") : t.enabled ? badge("enabled") : badge("disabled")),
  },
];

export const trajectoryColumns: readonly Column<Trajectory>[] = [
  { label: "#", cell: (t) => t.id, numeric: true },
  {
    label: "Task",
    cell: (t) => h("span", { title: t.instruction }, h("code", {}, t.task), " ", truncate(t.instruction, 60)),
  },
  { label: "Source", cell: (t) => t.source.replace(/_/g, " ") },
  { label: "Status", cell: (t) => badge(t.status) },
  { label: "Steps", cell: (t) => t.num_steps, numeric: true },
  { label: "Reward", cell: (t) => reward(t.final_reward), numeric: true },
  { label: "Validation", cell: (t) => validation(t.validation) },
  { label: "Review", cell: (t) => (t.review_state === "none" ? "—" : badge(t.review_state)) },
  { label: "Created", cell: (t) => h("time", { datetime: t.created_at, title: t.created_at }, ago(t.created_at)) },
];

export const poolColumns: readonly Column<Pool>[] = [
  { label: "Pool", cell: (p) => h("a", { href: `/pools/?pool=${p.id}` }, p.name) },
  { label: "Description", cell: (p) => truncate(p.description, 90) || "—" },
  { label: "Tasks", cell: (p) => p.task_count, numeric: true },
  { label: "Candidates per step", cell: (p) => p.candidates_n, numeric: true },
  { label: "Validation", cell: (p) => p.validation_mode },
];

export const checkpointColumns: readonly Column<Checkpoint>[] = [
  { label: "Version", cell: (c) => h("code", {}, c.version) },
  { label: "Parent", cell: (c) => (c.parent === null ? "—" : h("code", {}, c.parent)) },
  { label: "Run", cell: (c) => (c.run === null ? "—" : `#${c.run}`) },
  { label: "Annotation model", cell: (c) => (c.is_annotation_model ? badge("in use", "succeeded") : "") },
  { label: "Created", cell: (c) => h("time", { datetime: c.created_at, title: c.created_at }, ago(c.created_at)) },
];
