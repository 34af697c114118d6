// The run page's tables, drawn from what the run API returns: alert thresholds and alerts, episodes
// to replay, the run's environments, checkpoints. The page (run.ts) loads the data and keeps them live.

import { api } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { ago } from "../lib/format";
import { formatValue } from "./chart";
import type { AlertRow, CheckpointRow, EpisodeRow, Fleet, RunDetail } from "./types";

const head = (cols: string[]): HTMLElement => h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", {}, c))));

/** What each alert watches, with the run's thresholds. */
export function thresholdsView(t: RunDetail["alert_settings"]): HTMLElement {
  const rows: [string, string][] = [
    ["entropy collapse", `policy/entropy < ${t.entropy_min}`],
    ["entropy blow-up", `policy/entropy > ${t.entropy_max}`],
    ["explained-variance drop", `value/explained_variance more than ${t.ev_drop} below its best of the last ${t.window} steps`],
    ["reward up, success down", `both move by ≥ ${t.divergence_min} over ${t.window} steps`],
    ["staleness violation", `efficiency/staleness_max > ${t.staleness_bound}`],
    ["environment crash spike", `fleet/crash_rate > ${t.env_crash_rate_max}`],
  ];
  return h("details", {}, h("summary", {}, `Thresholds (set at launch, section "alerts"; an alert repeats at most every ${t.cooldown_steps} steps)`), h("table", { class: "data" }, h("tbody", {}, ...rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v))))));
}

export function alertsView(rows: AlertRow[]): HTMLElement {
  if (rows.length === 0) return notice("empty", "No alerts.");
  return h(
    "table",
    { class: "data" },
    head(["Alert", "Step", "Value", "Threshold", ""]),
    h("tbody", {}, ...rows.map((a) => h("tr", { class: "rc-alert", "data-testid": `alert-${a.kind}` }, h("td", {}, badge(a.kind.replace(/_/g, " "), "failed")), h("td", { class: "num" }, a.step), h("td", { class: "num" }, formatValue(a.value)), h("td", { class: "num" }, formatValue(a.threshold)), h("td", {}, a.message)))),
  );
}

export function episodesView(rows: EpisodeRow[]): HTMLElement {
  if (rows.length === 0) return notice("empty", "No episodes yet.");
  return h(
    "table",
    { class: "data" },
    head(["Episode", "Task", "Status", "Reward", "Steps", "Policy version", ""]),
    h("tbody", {}, ...rows.map((r) => h("tr", {}, h("td", {}, `#${r.id}`), h("td", {}, r.task), h("td", {}, badge(r.status)), h("td", { class: "num" }, r.final_reward === null ? "—" : formatValue(r.final_reward)), h("td", { class: "num" }, r.num_steps), h("td", {}, r.policy_version || "—"), h("td", {}, h("a", { href: `/replay/${r.id}/`, "data-testid": `replay-${r.id}` }, "Replay"))))),
  );
}

/** Counts, the live leases (a desktop's "Watch" calls `onWatch`) and the recent ended ones. */
export function fleetView(f: Fleet, onWatch: (leaseId: string) => void): (HTMLElement | null)[] {
  const counts = Object.entries(f.counts).map(([k, v]) => h("span", { class: "rc-count" }, h("b", {}, v), ` ${k}`));
  const live = f.live.map((l) => {
    const watch = h("button", { type: "button", class: "btn btn-small btn-secondary", disabled: !l.watchable, title: l.watchable ? "watch live, read-only" : "only desktops stream over VNC", "data-testid": `watch-${l.lease_id}` }, "Watch");
    watch.addEventListener("click", () => { onWatch(l.lease_id); });
    return h("tr", {}, h("td", {}, l.env_id), h("td", {}, l.kind), h("td", {}, l.task || "—"), h("td", {}, badge(l.state)), h("td", { class: "num" }, l.boot_s === null ? "—" : `${l.boot_s.toFixed(1)} s`), h("td", {}, watch));
  });
  const ended = f.ended.slice(0, 10).map((l) => h("tr", {}, h("td", {}, l.env_id), h("td", {}, l.kind), h("td", {}, l.task || "—"), h("td", {}, badge(l.state)), h("td", { class: "num" }, l.boot_s === null ? "—" : `${l.boot_s.toFixed(1)} s`), h("td", {}, l.ended_at ? ago(l.ended_at) : "")));
  return [
    h("div", { class: "rc-counts" }, ...counts, h("span", { class: "rc-count" }, h("b", {}, f.fleet_idle), " idle in the fleet"), f.boot_s_mean === null ? null : h("span", { class: "rc-count" }, h("b", {}, `${f.boot_s_mean} s`), " mean boot")),
    live.length ? h("table", { class: "data" }, head(["Environment", "Kind", "Task", "State", "Boot", ""]), h("tbody", {}, ...live)) : notice("empty", "No environment is leased by this run right now."),
    ended.length ? h("details", {}, h("summary", {}, `Recent ended leases (${f.ended.length})`), h("table", { class: "data" }, head(["Environment", "Kind", "Task", "Outcome", "Boot", "Ended"]), h("tbody", {}, ...ended))) : null,
  ];
}

/** The run's checkpoints: fork from one, or promote it (then `onPromoted` reloads the list). */
export function checkpointsView(rows: CheckpointRow[], runId: number, onPromoted: () => void): HTMLElement[] {
  if (rows.length === 0) return [notice("empty", "This run has not saved a checkpoint yet.")];
  const status = h("div", { class: "form-status" });
  return [
    h(
      "table",
      { class: "data" },
      head(["Version", "Saved", "Metrics", ""]),
      h("tbody", {}, ...rows.map((c) => {
        const promote = h("button", { type: "button", class: "btn btn-small", disabled: c.is_annotation_model, title: "make it the annotation model (admins)" }, c.is_annotation_model ? "annotation model" : "Promote");
        promote.addEventListener("click", () => {
          api(`/api/checkpoints/${c.id}/promote/`, { method: "POST" })
            .then(() => { render(status, notice("info", `${c.version} is now the annotation model.`)); onPromoted(); })
            .catch((err: unknown) => { render(status, notice("error", err instanceof Error ? err.message : String(err))); });
        });
        return h("tr", {}, h("td", {}, c.version), h("td", {}, ago(c.created_at)), h("td", { class: "muted" }, Object.entries(c.metrics).slice(0, 4).map(([k, v]) => `${k} ${typeof v === "number" ? formatValue(v) : JSON.stringify(v)}`).join(" · ")), h("td", {}, h("a", { class: "btn btn-small btn-secondary", href: `/runs/new/?fork=${runId}&checkpoint=${encodeURIComponent(c.version)}` }, "Fork from here"), " ", promote));
      })),
    ),
    status,
  ];
}
