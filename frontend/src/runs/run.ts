// The live page of one run: status and controls, every metric as a uPlot chart grouped as SPEC §9
// lists them, alerts with their thresholds, episodes to replay, the environment fleet (watch a
// desktop read-only through noVNC), checkpoints (fork, promote) and exports; the tables are drawn by
// panels.ts.
//
// Charts load the server's min/max-downsampled series (the same function serves live and finished
// runs); live points from the websocket are appended, and once a chart holds more than twice the
// requested points it reloads the downsampled series, so a live chart converges to what a finished
// one shows.

import { openWatch } from "../fleet/watch";
import { api } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { ago, percent } from "../lib/format";
import { ChartHub, MetricChart } from "./chart";
import { progressBar } from "./list";
import { chartSpecs, eventX, PHASE_METRIC, phaseBands, PRETRAIN_METRIC, PRETRAIN_UPDATES_METRIC, trainingPhase, type ChartSpec } from "./series";
import { alertsView, checkpointsView, episodesView, fleetView, thresholdsView } from "./panels";
import { RunSocket } from "./socket";
import {
  X_AXES,
  X_LABELS,
  type AlertRow,
  type CatalogueRow,
  type CheckpointRow,
  type EpisodeRow,
  type Fleet,
  type RunDetail,
  type RunEvent,
  type SeriesResponse,
  type StatusEvent,
  type XAxis,
} from "./types";

export const POINTS = 1000;

/** The run's external policy endpoints with the key each must be started with (new weights come with it). */
function endpointKeys(keys: { url: string; key: string }[]): HTMLElement {
  return h(
    "details",
    { class: "rc-keys", "data-testid": "endpoint-keys" },
    h("summary", {}, "Weights keys of the policy endpoints"),
    h("p", { class: "muted" }, "Start each server with its own key (vLLM: --api-key; Flywheel's server: FLYWHEEL_POLICY_SECRET): the run pushes new weights with it."),
    h("ul", {}, ...keys.map((k) => h("li", {}, h("code", {}, k.url), " ", h("code", {}, k.key)))),
  );
}
const MAX_NAMES_PER_REQUEST = 20;
const FLEET_POLL_MS = 5000;

const CONTROLS: Record<string, string[]> = {
  created: ["launch", "stop"],
  running: ["pause", "stop"],
  paused: ["resume", "stop"],
};

export async function fetchSeries(runId: number, names: string[], x: XAxis, points = POINTS): Promise<SeriesResponse["series"]> {
  const out: SeriesResponse["series"] = [];
  for (let i = 0; i < names.length; i += MAX_NAMES_PER_REQUEST) {
    const chunk = names.slice(i, i + MAX_NAMES_PER_REQUEST);
    const q = new URLSearchParams({ names: chunk.join(","), x, points: String(points) });
    const body = await api<SeriesResponse>(`/api/rl/runs/${runId}/metrics/?${q.toString()}`);
    out.push(...body.series);
  }
  return out;
}

class RunPage {
  private run!: RunDetail;
  private axis: XAxis = "step";
  private readonly hub = new ChartHub();
  private readonly charts = new Map<string, MetricChart>(); // chart id → chart
  private readonly chartOf = new Map<string, MetricChart>(); // metric name → chart
  private readonly refetchAt = new Map<string, number>();
  private catalogue = new Map<string, CatalogueRow>();
  private pretrain: { on?: number | undefined; updates?: number | undefined } = {};
  private connectedOnce = false;
  private fleetTimer = 0;
  private fleetPoll = 0;
  private episodesTimer = 0;
  private checkpointsSeen = -1; // the run's policy version when the checkpoint list was last loaded
  private episodesSeen = -1; // the run's episode count when the list was last loaded
  private episodePick = "latest";
  private episodeTask = "";

  private readonly el = {
    head: h("div", { class: "page-head rc-head", "data-testid": "run-head" }),
    controls: h("div", { class: "rc-controls", "data-testid": "controls" }),
    message: h("div", { class: "form-status", "data-testid": "control-status" }),
    link: h("span", { class: "rc-link", "data-testid": "link-state" }, "connecting…"),
    counters: h("div", { class: "rc-counters", "data-testid": "counters" }),
    wait: h("div", { "data-testid": "wait-reason" }),
    groups: h("div", { class: "rc-groups", "data-testid": "charts" }),
    alerts: h("div", { "data-testid": "alerts" }),
    thresholds: h("div", { "data-testid": "thresholds" }),
    episodes: h("div", { "data-testid": "episodes" }),
    fleet: h("div", { "data-testid": "fleet" }),
    watch: h("div", { class: "rc-watch", "data-testid": "watch" }),
    checkpoints: h("div", { "data-testid": "checkpoints" }),
  };

  constructor(
    private readonly root: HTMLElement,
    private readonly runId: number,
  ) {}

  async start(): Promise<void> {
    const [run, catalogue] = await Promise.all([
      api<RunDetail>(`/api/rl/runs/${this.runId}/`),
      api<CatalogueRow[]>("/api/rl/metric-names/"),
    ]);
    this.run = run;
    this.catalogue = new Map(catalogue.map((c) => [c.name, c]));
    this.layout();
    this.renderStatus(run);
    this.renderWait(run.wait_reason);
    await Promise.all([this.loadCharts(), this.loadAlerts(), this.loadEpisodes(), this.loadFleet(), this.loadCheckpoints()]);
    new RunSocket(this.runId, (e) => { this.onEvent(e); }, (state, detail) => {
      this.el.link.textContent = state === "live" ? "● live" : `${state}${detail ? ` (${detail})` : ""}`;
      this.el.link.className = `rc-link rc-link-${state}`;
    }, () => {
      if (this.connectedOnce) void this.loadCharts(); // catch up on what arrived while disconnected
      this.connectedOnce = true;
    }).start();
    window.addEventListener("resize", () => { for (const c of this.charts.values()) c.resize(); });
  }

  // ------------------------------------------------------------------------------- layout

  private layout(): void {
    const axisSel = h("select", { "data-testid": "x-axis" }, ...X_AXES.map((x) => h("option", { value: x }, X_LABELS[x])));
    axisSel.addEventListener("change", () => {
      this.axis = axisSel.value as XAxis;
      this.hub.xLabel = X_LABELS[this.axis];
      void this.loadCharts();
    });
    const smoothing = h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: 0, "data-testid": "smoothing" });
    const smoothingOut = h("output", {}, "0");
    smoothing.addEventListener("input", () => {
      this.hub.smoothing = Number(smoothing.value);
      smoothingOut.textContent = smoothing.value;
      this.hub.redrawAll();
    });
    const reset = h("button", { type: "button", class: "btn btn-secondary btn-small", "data-testid": "reset-zoom" }, "Reset zoom");
    reset.addEventListener("click", () => { for (const c of this.charts.values()) c.setZoom(null, null); });
    const pick = h("select", { "data-testid": "episode-pick" }, ...[["latest", "latest"], ["best", "best reward"], ["worst", "worst reward"], ["step_reward", "highest step reward"]].map(([v, t]) => h("option", { value: v ?? "" }, t)));
    const task = h("input", { placeholder: "task id (optional)", size: 16, "data-testid": "episode-task" });
    const reload = (): void => {
      this.episodePick = pick.value;
      this.episodeTask = task.value.trim();
      void this.loadEpisodes();
    };
    pick.addEventListener("change", reload);
    task.addEventListener("change", reload);

    render(
      this.root,
      this.el.head,
      h("section", { class: "card" }, this.el.counters, this.el.wait, h("div", { class: "rc-bar" }, this.el.controls, this.el.link), this.el.message),
      h(
        "section",
        { class: "card" },
        h(
          "div",
          { class: "card-head" },
          h("h2", {}, "Metrics"),
          h(
            "div",
            { class: "rc-toolbar" },
            h("label", { class: "field" }, "x axis", axisSel),
            h("label", { class: "field" }, "smoothing", h("span", {}, smoothing, " ", smoothingOut)),
            reset,
            h("a", { href: `/api/rl/runs/${this.runId}/export.csv`, class: "btn btn-secondary btn-small", "data-testid": "export-csv" }, "CSV"),
            h("a", { href: `/api/rl/runs/${this.runId}/export.tfevents`, class: "btn btn-secondary btn-small", "data-testid": "export-tb" }, "TensorBoard"),
          ),
        ),
        h("p", { class: "muted rc-hint" }, `Drag across a chart to zoom every chart; double-click to reset. Long series are downsampled on the server to ${POINTS} points keeping each bucket's minimum and maximum.`),
        this.el.groups,
      ),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Alerts")), this.el.thresholds, this.el.alerts),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Episodes"), h("div", { class: "rc-toolbar" }, pick, task)), this.el.episodes),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Environment fleet")), this.el.fleet, this.el.watch),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Checkpoints")), this.el.checkpoints),
    );
  }

  private renderStatus(s: RunDetail | StatusEvent): void {
    const run = this.run;
    Object.assign(run, {
      status: s.status, error: s.error, updates_done: s.updates_done, episodes_done: s.episodes_done,
      policy_version: s.policy_version, samples: s.samples, headline_success: s.headline_success,
    });
    const budget = (run.config.budget ?? {}) as Record<string, number | null>;
    const maxUpdates = budget.max_updates ?? null;
    const progress = maxUpdates ? Math.min(1, run.updates_done / maxUpdates) : run.progress;
    render(
      this.el.head,
      h(
        "div",
        {},
        h("h1", {}, run.name, " ", h("span", { "data-testid": "run-status" }, badge(run.status))),
        h("p", {}, `#${run.id} · ${run.variant} · ${run.mode} · pool ${run.pool_name ?? "—"} · started by ${run.created_by ?? "—"} ${ago(run.created_at)}`, run.parent ? h("span", {}, " · fork of ", h("a", { href: `/runs/${run.parent}/` }, `#${run.parent}`)) : null),
        run.error ? notice("error", run.error) : null,
        run.endpoint_keys?.length ? endpointKeys(run.endpoint_keys) : null,
      ),
      h("div", {}, h("a", { class: "btn btn-secondary", href: `/runs/compare/?runs=${run.id}${run.parent ? `,${run.parent}` : ""}` }, "Compare…")),
    );
    const counter = (label: string, value: string, id: string): HTMLElement =>
      h("div", { class: "rc-counter" }, h("div", { class: "rc-counter-value", "data-testid": `counter-${id}` }, value), h("div", { class: "muted" }, label));
    render(
      this.el.counters,
      counter("updates", String(run.updates_done), "updates"),
      counter("episodes", String(run.episodes_done), "episodes"),
      counter("policy version", String(run.policy_version), "version"),
      counter("samples", String(run.samples), "samples"),
      counter("verified success", percent(run.headline_success), "success"),
      run.algorithm === "ppo" ? counter("phase", this.phaseText(), "phase") : null,
      h("div", { class: "rc-counter rc-progress" }, progressBar(progress), h("div", { class: "muted" }, "budget")),
    );
    if (this.episodesSeen >= 0 && run.episodes_done !== this.episodesSeen) this.scheduleEpisodes();
    // A new policy version is a new checkpoint: the list follows it too.
    if (this.checkpointsSeen >= 0 && run.policy_version !== this.checkpointsSeen) void this.loadCheckpoints();
    const buttons = (CONTROLS[run.status] ?? []).map((action) => {
      const b = h("button", { type: "button", class: `btn${action === "stop" ? " btn-secondary" : ""}`, "data-testid": `action-${action}` }, `${action.charAt(0).toUpperCase()}${action.slice(1)}`);
      b.addEventListener("click", () => { void this.control(action); });
      return b;
    });
    const fork = h("a", { class: "btn btn-secondary", href: `/runs/new/?fork=${run.id}`, "data-testid": "action-fork" }, "Fork…");
    render(this.el.controls, ...buttons, fork);
  }

  private phaseText(): string {
    const cap = (this.run.config.ppo as Record<string, number> | undefined)?.value_pretrain_max_updates;
    return trainingPhase(this.run.algorithm, this.pretrain.on, this.pretrain.updates, cap);
  }

  /** PPO's critic warm-up from its metrics (the loaded series' last points, or a live event). */
  private setPretrain(on: number | undefined, updates: number | undefined): void {
    if (on === undefined) return;
    this.pretrain = { on, updates: updates ?? this.pretrain.updates };
    const el = this.el.counters.querySelector('[data-testid="counter-phase"]');
    if (el) el.textContent = this.phaseText();
  }

  private async control(action: string): Promise<void> {
    render(this.el.message, notice("loading", `${action}…`));
    try {
      const run = await api<RunDetail>(`/api/rl/runs/${this.runId}/${action}/`, { method: "POST" });
      this.renderStatus(run);
      render(this.el.message);
    } catch (err) {
      render(this.el.message, notice("error", err instanceof Error ? err.message : String(err)));
    }
  }

  // ------------------------------------------------------------------------------- charts

  private label(name: string): string {
    for (const prefix of ["outcome/success_rate/task/", "outcome/success_rate/domain/", "curation/rollouts_per_task/", "curation/bucket/"]) {
      if (name.startsWith(prefix)) return name.slice(prefix.length);
    }
    return name;
  }

  private makeChart(spec: ChartSpec): MetricChart {
    const description = this.catalogue.get(spec.id)?.description ?? "";
    const chart = new MetricChart(spec.id, spec.title, description, this.hub, (n) => this.label(n));
    chart.bindReset();
    this.charts.set(spec.id, chart);
    for (const n of spec.names) this.chartOf.set(n, chart);
    return chart;
  }

  private groupEl(group: string): HTMLElement {
    let el = this.el.groups.querySelector<HTMLElement>(`[data-group="${group}"] .rc-grid`);
    if (el === null) {
      const grid = h("div", { class: "rc-grid" });
      const desc = { outcome: "what the policy achieves", policy: "the policy update", value: "the critic (PPO)", efficiency: "throughput and the asynchronous pipeline", curation: "which rollouts are sampled and trained on", fleet: "the environment fleet" }[group] ?? "";
      this.el.groups.append(h("div", { class: "rc-group", "data-group": group, "data-testid": `group-${group}` }, h("h3", {}, group, " ", h("span", { class: "muted" }, desc)), grid));
      el = grid;
    }
    return el;
  }

  async loadCharts(): Promise<void> {
    const { names } = await api<{ names: string[] }>(`/api/rl/runs/${this.runId}/metric-names/`);
    for (const c of this.charts.values()) c.destroy();
    this.charts.clear();
    this.chartOf.clear();
    render(this.el.groups);
    if (names.length === 0) {
      this.el.groups.append(notice("empty", "No metrics yet: curves appear here as soon as the trainer records its first step."));
    }
    const groups = chartSpecs(names);
    for (const [group, specs] of groups) {
      const grid = this.groupEl(group);
      for (const spec of specs) grid.append(this.makeChart(spec).el);
    }
    const series = await fetchSeries(this.runId, names, this.axis);
    for (const s of series) this.chartOf.get(s.name)?.setSeries(s.name, s, s.total);
    const last = (name: string): number | undefined => series.find((s) => s.name === name)?.last?.y;
    this.setPretrain(last(PRETRAIN_METRIC), last(PRETRAIN_UPDATES_METRIC));
    this.updateBands();
  }

  /** Entropulse: shade the SFT phases on every chart (from the phase counter the trainer records). */
  private updateBands(): void {
    const points = this.chartOf.get(PHASE_METRIC)?.points(PHASE_METRIC);
    this.hub.setBands(points ? phaseBands(points) : []);
  }

  private async refetch(chart: MetricChart): Promise<void> {
    const now = Date.now();
    if ((this.refetchAt.get(chart.id) ?? 0) > now) return;
    this.refetchAt.set(chart.id, now + 3000);
    const series = await fetchSeries(this.runId, chart.names(), this.axis);
    for (const s of series) chart.setSeries(s.name, s, s.total);
  }

  private onMetrics(e: Extract<RunEvent, { type: "run.metrics" }>): void {
    const x = eventX(e, this.axis);
    const fresh: string[] = [];
    for (const [name, value] of Object.entries(e.values)) {
      const chart = this.chartOf.get(name);
      if (chart === undefined) {
        fresh.push(name);
        continue;
      }
      if (chart.append(name, x, value) > 2 * POINTS) void this.refetch(chart);
    }
    if (fresh.length > 0) {
      this.el.groups.querySelector(".notice")?.remove();
      const known = [...this.chartOf.keys()];
      const groups = chartSpecs([...known, ...fresh]);
      for (const [group, specs] of groups) {
        for (const spec of specs) {
          let chart = this.charts.get(spec.id);
          if (chart === undefined) {
            chart = this.makeChart(spec);
            this.groupEl(group).append(chart.el);
          }
          for (const n of spec.names) this.chartOf.set(n, chart);
        }
      }
      for (const name of fresh) this.chartOf.get(name)?.append(name, x, e.values[name] ?? 0);
    }
    if (PHASE_METRIC in e.values) this.updateBands();
    this.setPretrain(e.values[PRETRAIN_METRIC], e.values[PRETRAIN_UPDATES_METRIC]);
    const success = e.values["outcome/verified_success_rate"];
    if (success !== undefined) {
      this.run.headline_success = success;
      const el = this.el.counters.querySelector('[data-testid="counter-success"]');
      if (el) el.textContent = percent(success);
    }
    if (Object.keys(e.values).some((n) => n.startsWith("fleet/"))) this.scheduleFleet();
  }

  private onEvent(e: RunEvent): void {
    if (e.type === "run.status") this.renderStatus(e);
    else if (e.type === "run.metrics") this.onMetrics(e);
    else this.prependAlert({ id: e.alert_id, kind: e.kind, step: e.step, value: e.value, threshold: e.threshold, message: e.message, created_at: new Date().toISOString() });
  }

  // ------------------------------------------------------------------------------- alerts

  private alertRows: AlertRow[] = [];

  private async loadAlerts(): Promise<void> {
    const body = await api<AlertRow[] | { results: AlertRow[] }>(`/api/rl/runs/${this.runId}/alerts/`);
    this.alertRows = Array.isArray(body) ? body : body.results;
    render(this.el.thresholds, thresholdsView(this.run.alert_settings));
    this.renderAlerts();
  }

  private prependAlert(a: AlertRow): void {
    if (this.alertRows.some((r) => r.id === a.id)) return;
    this.alertRows.unshift(a);
    this.renderAlerts();
  }

  private renderAlerts(): void {
    render(this.el.alerts, alertsView(this.alertRows));
  }

  // ----------------------------------------------------------------------------- episodes

  // The list follows the run: a status event with a new episode count reloads it (at most every 3 s),
  // so a page opened at launch does not keep saying "No episodes yet".
  private scheduleEpisodes(): void {
    if (this.episodesTimer !== 0) return;
    this.episodesTimer = window.setTimeout(() => {
      this.episodesTimer = 0;
      void this.loadEpisodes();
    }, 3000);
  }

  private async loadEpisodes(): Promise<void> {
    this.episodesSeen = this.run.episodes_done;
    const q = new URLSearchParams({ which: this.episodePick, limit: "25" });
    if (this.episodeTask) q.set("task", this.episodeTask);
    const rows = await api<EpisodeRow[]>(`/api/rl/runs/${this.runId}/episodes/pick/?${q.toString()}`);
    render(this.el.episodes, episodesView(rows));
  }

  // -------------------------------------------------------------------------------- fleet

  private scheduleFleet(): void {
    if (this.fleetTimer !== 0) return;
    this.fleetTimer = window.setTimeout(() => {
      this.fleetTimer = 0;
      void this.loadFleet();
    }, 1000);
  }

  /** Why the run waits, from the scheduler (the run detail, then every fleet load); hidden when it does not. */
  private renderWait(reason: string | null): void {
    if (reason === null || this.run.status !== "running") render(this.el.wait);
    else render(this.el.wait, notice("info", reason));
  }

  private async loadFleet(): Promise<void> {
    const f = await api<Fleet>(`/api/rl/runs/${this.runId}/fleet/`);
    this.renderWait(f.wait_reason);
    // While the run runs, its environments and wait reason are read again every few seconds.
    window.clearTimeout(this.fleetPoll);
    if (this.run.status === "running") this.fleetPoll = window.setTimeout(() => { this.scheduleFleet(); }, FLEET_POLL_MS);
    render(this.el.fleet, ...fleetView(f, (leaseId) => { void this.watch(leaseId); }));
  }

  private async watch(leaseId: string): Promise<void> {
    await openWatch(this.el.watch, leaseId.slice(0, 8), () => api<{ url: string }>(`/api/rl/runs/${this.runId}/fleet/${leaseId}/watch/`, { method: "POST" }));
  }

  // -------------------------------------------------------------------------- checkpoints

  private async loadCheckpoints(): Promise<void> {
    this.checkpointsSeen = this.run.policy_version;
    const rows = await api<CheckpointRow[]>(`/api/rl/runs/${this.runId}/checkpoints/`);
    render(this.el.checkpoints, ...checkpointsView(rows, this.runId, () => { void this.loadCheckpoints(); }));
  }
}

export async function mountRun(root: HTMLElement, runId: number): Promise<void> {
  await new RunPage(root, runId).start();
}
