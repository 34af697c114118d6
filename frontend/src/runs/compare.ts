// Run comparison: one metric overlaid for several runs (same x axis, smoothing, zoom), and the
// settings in which the runs differ, as a table.

import { api } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { percent } from "../lib/format";
import { ChartHub, MetricChart } from "./chart";
import { fetchSeries } from "./run";
import { X_AXES, X_LABELS, type RunRow, type XAxis } from "./types";

interface CompareBody {
  runs: RunRow[];
  config_diff: { key: string; values: unknown[] }[];
}

const PREFERRED = ["outcome/verified_success_rate", "outcome/success_rate", "outcome/reward_mean", "policy/entropy"];

function cell(v: unknown): string {
  if (v === null || v === undefined) return "—";
  return typeof v === "string" ? v : JSON.stringify(v);
}

export async function mountCompare(root: HTMLElement): Promise<void> {
  const ids = (new URLSearchParams(window.location.search).get("runs") ?? "").split(",").map(Number).filter((n) => n > 0);
  if (ids.length < 2) {
    render(root, h("div", { class: "page-head" }, h("h1", {}, "Compare runs")), notice("info", "Select two or more runs in the run list and press “Compare selected”."));
    return;
  }
  const body = await api<CompareBody>(`/api/rl/compare/?runs=${ids.join(",")}`);
  const nameSets = await Promise.all(ids.map((id) => api<{ names: string[] }>(`/api/rl/runs/${id}/metric-names/`)));
  const names = [...new Set(nameSets.flatMap((n) => n.names))].sort();
  const label = (id: number): string => {
    const r = body.runs.find((x) => x.id === id);
    return r ? `#${r.id} ${r.name}` : `#${id}`;
  };

  const metric = h("select", { "data-testid": "compare-metric" }, ...names.map((n) => h("option", { value: n }, n)));
  metric.value = PREFERRED.find((p) => names.includes(p)) ?? names[0] ?? "";
  const axis = h("select", { "data-testid": "compare-x" }, ...X_AXES.map((x) => h("option", { value: x }, X_LABELS[x])));
  const smoothing = h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: 0 });
  const hub = new ChartHub();
  const chartBox = h("div", { class: "rc-compare-chart" });
  let chart: MetricChart | null = null;

  const draw = async (): Promise<void> => {
    chart?.destroy();
    hub.xLabel = X_LABELS[axis.value as XAxis];
    chart = new MetricChart("compare", metric.value, "", hub, (key) => label(Number(key)), 320);
    chart.bindReset();
    render(chartBox, chart.el);
    if (metric.value === "") return;
    const all = await Promise.all(ids.map((id) => fetchSeries(id, [metric.value], axis.value as XAxis)));
    all.forEach((series, i) => {
      const s = series[0];
      const id = ids[i] ?? 0;
      chart?.setSeries(String(id), s ?? { x: [], y: [] }, s?.total ?? 0);
    });
  };
  metric.addEventListener("change", () => void draw());
  axis.addEventListener("change", () => void draw());
  smoothing.addEventListener("input", () => {
    hub.smoothing = Number(smoothing.value);
    hub.redrawAll();
  });

  const runsTable = h(
    "table",
    { class: "data" },
    h("thead", {}, h("tr", {}, ...["Run", "Status", "Algorithm", "Updates", "Verified success"].map((t) => h("th", {}, t)))),
    h("tbody", {}, ...body.runs.map((r) => h("tr", {}, h("td", {}, h("a", { href: `/runs/${r.id}/` }, `#${r.id} ${r.name}`)), h("td", {}, badge(r.status)), h("td", {}, r.variant), h("td", { class: "num" }, r.updates_done), h("td", { class: "num" }, percent(r.headline_success))))),
  );
  const diff = body.config_diff.length === 0
    ? notice("info", "The runs have the same settings.")
    : h(
        "table",
        { class: "data", "data-testid": "config-diff" },
        h("thead", {}, h("tr", {}, h("th", {}, "Setting"), ...body.runs.map((r) => h("th", {}, `#${r.id}`)))),
        h("tbody", {}, ...body.config_diff.map((row) => h("tr", {}, h("td", {}, h("code", {}, row.key)), ...row.values.map((v) => h("td", {}, cell(v)))))),
      );
  render(
    root,
    h("div", { class: "page-head" }, h("div", {}, h("h1", {}, "Compare runs"), h("p", {}, body.runs.map((r) => `#${r.id} ${r.name}`).join(" vs ")))),
    h("section", { class: "card" }, runsTable),
    h("section", { class: "card", "data-testid": "compare-chart" }, h("div", { class: "card-head" }, h("h2", {}, "Overlay"), h("div", { class: "rc-toolbar" }, h("label", { class: "field" }, "metric", metric), h("label", { class: "field" }, "x axis", axis), h("label", { class: "field" }, "smoothing", smoothing))), chartBox),
    h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Settings that differ")), diff),
  );
  await draw();
}
