// The run list: filters, one row per run (status, algorithm, pool, progress, headline success,
// alerts, who started it, age), and "compare selected".

import { api, resultsOf } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { ago, percent } from "../lib/format";
import type { RunRow } from "./types";

const STATUSES = ["", "created", "running", "paused", "stopped", "finished", "failed"];

function select(name: string, label: string, options: readonly [string, string][]): HTMLLabelElement {
  return h(
    "label",
    { class: "field" },
    label,
    h("select", { name, "data-testid": `filter-${name}` }, ...options.map(([v, t]) => h("option", { value: v }, t))),
  );
}

export function progressBar(fraction: number | null): HTMLElement {
  if (fraction === null) return h("span", { class: "muted" }, "no budget");
  return h(
    "span",
    { class: "rate" },
    h("span", { class: "rate-track" }, h("span", { class: "rate-fill", style: `width:${(fraction * 100).toFixed(1)}%` })),
    h("span", { class: "rate-text" }, percent(fraction)),
  );
}

export function alertCell(run: RunRow): HTMLElement | string {
  if (run.alerts.count === 0) return "—";
  return h(
    "span",
    { class: "rc-alert-pill", title: `last: ${run.alerts.last_kind ?? ""} at step ${String(run.alerts.last_step)}` },
    `⚠ ${run.alerts.count} · ${(run.alerts.last_kind ?? "").replace(/_/g, " ")}`,
  );
}

export async function mountRunList(root: HTMLElement): Promise<void> {
  const filters = h(
    "form",
    { class: "export-form", "data-testid": "run-filters" },
    select("status", "Status", STATUSES.map((s) => [s, s === "" ? "any" : s])),
    select("algorithm", "Algorithm", [["", "any"], ["ppo", "PPO"], ["grpo", "Step-wise GRPO"]]),
    select("mode", "Mode", [["", "any"], ["async", "asynchronous"], ["sync", "synchronous"]]),
    h("label", { class: "field" }, "Started by", h("input", { name: "created_by", size: 10 })),
    h("label", { class: "field" }, "Success ≥", h("input", { name: "min_success", type: "number", step: "0.05", min: 0, max: 1, style: "width:6em" })),
  );
  const compare = h("button", { type: "button", class: "btn btn-secondary", disabled: true, "data-testid": "compare-selected" }, "Compare selected");
  const body = h("div", { class: "table-wrap" }, notice("loading", "Loading runs…"));
  render(root, h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Runs"), compare), filters, body));

  const selected = new Set<number>();
  compare.addEventListener("click", () => {
    window.location.assign(`/runs/compare/?runs=${[...selected].join(",")}`);
  });

  const load = async (): Promise<void> => {
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(filters)) if (typeof v === "string" && v !== "") q.set(k, v);
    const rows = resultsOf(await api<RunRow[] | { results: RunRow[] }>(`/api/rl/runs/?${q.toString()}`));
    if (rows.length === 0) {
      render(body, notice("empty", "No runs match. Launch one with the button above."));
      return;
    }
    const tr = rows.map((r) => {
      const box = h("input", { type: "checkbox", "aria-label": `select run ${r.id}`, "data-testid": `select-${r.id}`, checked: selected.has(r.id) });
      box.addEventListener("change", () => {
        if (box.checked) selected.add(r.id);
        else selected.delete(r.id);
        compare.disabled = selected.size < 2;
      });
      return h(
        "tr",
        { "data-testid": `run-row-${r.id}` },
        h("td", {}, box),
        h("td", {}, h("a", { href: `/runs/${r.id}/` }, r.name), h("div", { class: "muted" }, `#${r.id}${r.parent ? ` · fork of #${r.parent}` : ""}`)),
        h("td", {}, badge(r.status)),
        h("td", {}, r.variant, h("div", { class: "muted" }, r.preset || "custom")),
        h("td", {}, r.pool_name ?? "—"),
        h("td", {}, progressBar(r.progress), h("div", { class: "muted" }, `${r.updates_done} updates · ${r.episodes_done} episodes`)),
        h("td", { class: "num" }, percent(r.headline_success)),
        h("td", {}, alertCell(r)),
        h("td", {}, r.created_by ?? "—"),
        h("td", {}, ago(r.created_at)),
      );
    });
    render(
      body,
      h(
        "table",
        { class: "data", "data-testid": "run-table" },
        h("thead", {}, h("tr", {}, ...["", "Run", "Status", "Algorithm", "Pool", "Progress", "Verified success", "Alerts", "Started by", "Age"].map((t) => h("th", {}, t)))),
        h("tbody", {}, ...tr),
      ),
    );
  };
  filters.addEventListener("change", () => void load().catch((e: unknown) => { render(body, notice("error", String(e))); }));
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
  });
  await load();
}
