// Export section: start an archive export job (POST /api/export-jobs/) and follow each job live
// to a download link. The form's fields are rendered by the server from the export formats.

import { api, resultsOf } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { isTerminal, watchExportJob, type JobView } from "../lib/exportWatch";
import type { ExportJob } from "../lib/types";
import type { Widget } from "./mount";

const RECENT_JOBS = 5;

/** The filters an export form describes; empty fields are left out. */
export function exportFilters(form: HTMLFormElement): Record<string, string | number | string[]> {
  const data = new FormData(form);
  const filters: Record<string, string | number | string[]> = {};
  const source = data.get("source");
  if (typeof source === "string" && source !== "") filters.source = [source];
  if (data.get("validated_only") !== null) filters.validation = 1;
  const pool = data.get("pool_name");
  if (typeof pool === "string" && pool.trim() !== "") filters.pool_name = pool.trim();
  return filters;
}

export function jobRow(job: JobView & { format?: string }, onCancel: (id: number) => void): HTMLElement {
  const pct = Math.min(100, Math.max(0, job.progress));
  const counts =
    job.total_trajectories > 0 ? `${job.done_trajectories} / ${job.total_trajectories} trajectories` : "";
  const actions: (Node | string)[] = [];
  if (job.status === "succeeded" && job.download_url) {
    actions.push(h("a", { class: "btn btn-small", href: job.download_url, download: "" }, "Download"));
  }
  if (!isTerminal(job.status)) {
    const cancel = h("button", { type: "button", class: "btn btn-small btn-secondary" }, "Cancel");
    cancel.addEventListener("click", () => {
      cancel.disabled = true;
      onCancel(job.id);
    });
    actions.push(cancel);
  }
  return h(
    "li",
    { class: "job", "data-job-id": job.id, "data-status": job.status },
    h("div", { class: "job-head" }, h("strong", {}, `Export #${job.id}`), job.format ? ` · ${job.format}` : "", " ", badge(job.status)),
    h(
      "div",
      { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct.toFixed(0) },
      h("span", { class: "progress-fill", style: `width:${pct.toFixed(1)}%` }),
    ),
    h("div", { class: "job-meta" }, h("span", {}, `${pct.toFixed(0)} %`), counts && h("span", {}, counts), ...actions),
    job.error !== "" && h("p", { class: job.status === "failed" ? "notice notice-error" : "notice notice-info" }, job.error),
  );
}

export const exportWidget: Widget = async (el) => {
  const form = el.querySelector("form");
  const list = el.querySelector<HTMLElement>("[data-export-jobs]");
  if (form === null || list === null) throw new Error("The export section is missing its form or job list.");
  const status = h("div", { class: "form-status", "aria-live": "polite" });
  form.append(status);
  const jobs = h("ul", { class: "jobs" });
  const formats = new Map<number, string>();

  const show = (job: JobView): void => {
    const row = jobRow({ ...job, format: formats.get(job.id) ?? "" }, cancel);
    const existing = jobs.querySelector(`[data-job-id="${job.id}"]`);
    if (existing === null) jobs.prepend(row);
    else existing.replaceWith(row);
    render(list, jobs);
  };
  const follow = (job: ExportJob): void => {
    formats.set(job.id, job.format);
    show(job);
    if (!isTerminal(job.status)) {
      watchExportJob(job.id, show, (message) => { render(status, notice("error", message)); });
    }
  };
  function cancel(id: number): void {
    api<ExportJob>(`/api/export-jobs/${id}/cancel/`, { method: "POST" })
      .then(show)
      .catch((error: unknown) => { render(status, notice("error", error instanceof Error ? error.message : String(error))); });
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const format = new FormData(form).get("format");
    const button = form.querySelector<HTMLButtonElement>("button[type=submit]");
    if (button) button.disabled = true;
    render(status);
    api<ExportJob>("/api/export-jobs/", { method: "POST", body: { format, filters: exportFilters(form) } })
      .then(follow)
      .catch((error: unknown) => { render(status, notice("error", error instanceof Error ? error.message : String(error))); })
      .finally(() => { if (button) button.disabled = false; });
  });

  render(list, notice("loading", "Loading recent exports…"));
  const recent = resultsOf(await api<ExportJob[] | { results: ExportJob[] }>("/api/export-jobs/")).slice(0, RECENT_JOBS);
  if (recent.length === 0) render(list, notice("empty", "No exports yet. Pick a format and start one."));
  for (const job of recent.reverse()) follow(job);
};
