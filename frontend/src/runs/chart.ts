// One uPlot chart of one metric (or of every key under a keyed prefix). Drag to zoom the x axis,
// double-click to reset; zoom is shared by every chart of a hub (the run page, the comparison).

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { h } from "../lib/dom";
import { align, appendPoint, smooth, type Band, type Points } from "./series";

export const PALETTE = ["#1f5eff", "#e8590c", "#0ca678", "#ae3ec9", "#f59f00", "#1098ad", "#d6336c", "#5c940d"];

/** Charts that zoom together; `smoothing` (0..0.99) applies to all of them. */
export class ChartHub {
  readonly charts = new Set<MetricChart>();
  smoothing = 0;
  xLabel = "training step";
  /** Entropulse SFT phases, shaded on every chart of the hub (x in the hub's axis). */
  bands: Band[] = [];
  private syncing = false;
  readonly syncKey = `hub-${Math.random().toString(36).slice(2)}`;

  zoomed(from: MetricChart, min: number | null, max: number | null): void {
    if (this.syncing) return;
    this.syncing = true;
    for (const c of this.charts) if (c !== from) c.setZoom(min, max);
    this.syncing = false;
  }

  redrawAll(): void {
    for (const c of this.charts) c.redraw();
  }

  setBands(bands: Band[]): void {
    if (JSON.stringify(bands) === JSON.stringify(this.bands)) return;
    this.bands = bands;
    for (const c of this.charts) c.repaint();
  }
}

function drawBands(u: uPlot, bands: readonly Band[]): void {
  const ctx = u.ctx;
  ctx.save();
  ctx.font = `${Math.round(10 * devicePixelRatio)}px sans-serif`;
  for (const band of bands) {
    const left = u.valToPos(band.from, "x", true);
    const right = u.valToPos(band.to, "x", true);
    const x0 = Math.max(u.bbox.left, Math.min(left, right));
    const x1 = Math.min(u.bbox.left + u.bbox.width, Math.max(left, right));
    if (x1 < u.bbox.left || x0 > u.bbox.left + u.bbox.width) continue;
    ctx.fillStyle = "rgba(245, 159, 0, 0.22)";
    ctx.fillRect(x0, u.bbox.top, Math.max(2 * devicePixelRatio, x1 - x0), u.bbox.height);
    ctx.fillStyle = "#b35c00";
    ctx.fillText(band.label, x0 + 2 * devicePixelRatio, u.bbox.top + 11 * devicePixelRatio);
  }
  ctx.restore();
}

function width(el: HTMLElement): number {
  return Math.max(240, Math.floor(el.getBoundingClientRect().width || 360));
}

export class MetricChart {
  readonly el: HTMLElement;
  private readonly plotEl: HTMLElement;
  private readonly lastEl: HTMLElement;
  private readonly series = new Map<string, Points>();
  private readonly totals = new Map<string, number>();
  private plot: uPlot | null = null;
  private plotSeriesCount = -1;
  private zoom: [number, number] | null = null;
  private pending = false;

  constructor(
    readonly id: string,
    readonly title: string,
    readonly description: string,
    private readonly hub: ChartHub,
    private readonly labels: (name: string) => string = (n) => n,
    private readonly height = 190,
  ) {
    this.plotEl = h("div", { class: "rc-plot" });
    this.lastEl = h("span", { class: "rc-last", "data-testid": `last-${id}` }, "—");
    this.el = h(
      "figure",
      { class: "rc-chart", "data-testid": `chart-${id}`, "data-points": 0 },
      h("figcaption", {}, h("span", { class: "rc-title", title: description }, title), this.lastEl),
      this.plotEl,
    );
    hub.charts.add(this);
  }

  /** Replace a series with what the server sent (already downsampled), `total` stored points. */
  setSeries(name: string, points: Points, total: number): void {
    this.series.set(name, { x: [...points.x], y: [...points.y] });
    this.totals.set(name, total);
    this.schedule();
  }

  /** A live point; returns how many points the chart now holds for that series. */
  append(name: string, x: number, y: number): number {
    const s = this.series.get(name) ?? { x: [], y: [] };
    this.series.set(name, s);
    appendPoint(s, x, y);
    this.totals.set(name, (this.totals.get(name) ?? 0) + 1);
    this.schedule();
    return s.x.length;
  }

  /** The points held for one series (e.g. the Entropulse phase counter). */
  points(name: string): Points | undefined {
    return this.series.get(name);
  }

  /** Draw again without new data (the hub's bands changed). */
  repaint(): void {
    this.el.dataset.bands = String(this.hub.bands.length);
    this.plot?.redraw(false, false);
  }

  pointsHeld(): number {
    let n = 0;
    for (const s of this.series.values()) n += s.x.length;
    return n;
  }

  names(): string[] {
    return [...this.series.keys()].sort();
  }

  setZoom(min: number | null, max: number | null): void {
    this.zoom = min === null || max === null ? null : [min, max];
    this.markZoom();
    if (this.plot === null) return;
    if (this.zoom === null) {
      this.redraw(true);
    } else {
      this.plot.setScale("x", { min: this.zoom[0], max: this.zoom[1] });
    }
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.redraw();
    });
  }

  redraw(resetZoom = false): void {
    const names = this.names();
    const raw = names.map((n) => this.series.get(n) ?? { x: [], y: [] });
    const [xs, ...ys] = align(raw);
    const smoothing = this.hub.smoothing;
    const lines: (number | null)[][] = [];
    const seriesOpts: uPlot.Series[] = [{ label: this.hub.xLabel }];
    names.forEach((name, i) => {
      const colour = PALETTE[i % PALETTE.length] ?? "#1f5eff";
      const y = ys[i] ?? [];
      const label = this.labels(name);
      if (smoothing > 0) {
        if (names.length === 1) {
          lines.push(y);
          seriesOpts.push({ label: `${label} (raw)`, stroke: `${colour}40`, width: 1, spanGaps: true });
        }
        lines.push(smooth(y, smoothing));
        seriesOpts.push({ label, stroke: colour, width: 1.6, spanGaps: true });
      } else {
        lines.push(y);
        seriesOpts.push({ label, stroke: colour, width: 1.4, spanGaps: true, points: { show: xs.length < 60 } });
      }
    });
    const data = [xs, ...lines] as uPlot.AlignedData;
    this.el.dataset.lines = String(lines.length);
    const held = this.pointsHeld();
    this.el.dataset.points = String(held);
    const total = [...this.totals.values()].reduce((a, b) => a + b, 0);
    this.el.dataset.total = String(total);
    this.el.dataset.bands = String(this.hub.bands.length);
    const first = raw[0];
    if (names.length === 1 && first !== undefined && first.y.length > 0) {
      const lastX = first.x[first.x.length - 1] ?? 0;
      const lastY = first.y[first.y.length - 1] ?? 0;
      this.lastEl.textContent = `${formatValue(lastY)} @ ${formatValue(lastX)}`;
      this.el.dataset.lastX = String(lastX);
    } else if (names.length > 1) {
      this.lastEl.textContent = `${names.length} series`;
    }
    if (this.plot === null || this.plotSeriesCount !== seriesOpts.length) {
      this.plot?.destroy();
      this.plotSeriesCount = seriesOpts.length;
      this.plot = new uPlot(this.options(seriesOpts), data, this.plotEl);
    } else {
      this.plot.setData(data, this.zoom === null || resetZoom);
    }
    if (this.zoom !== null && !resetZoom) this.plot.setScale("x", { min: this.zoom[0], max: this.zoom[1] });
  }

  private options(series: uPlot.Series[]): uPlot.Options {
    return {
      width: width(this.el),
      height: this.height,
      series,
      scales: { x: { time: false } },
      legend: { show: series.length > 2, live: true },
      cursor: { sync: { key: this.hub.syncKey }, drag: { x: true, y: false } },
      axes: [{ size: 34 }, { size: 52 }],
      hooks: {
        draw: [(u) => { drawBands(u, this.hub.bands); }],
        setSelect: [
          (u) => {
            if (u.select.width < 2) return;
            const min = u.posToVal(u.select.left, "x");
            const max = u.posToVal(u.select.left + u.select.width, "x");
            this.zoom = [min, max];
            this.markZoom();
            this.hub.zoomed(this, min, max);
          },
        ],
      },
    };
  }

  /** The zoomed x range as `data-zoom="min,max"` (absent when not zoomed), for tests and styling. */
  private markZoom(): void {
    if (this.zoom === null) delete this.el.dataset.zoom;
    else this.el.dataset.zoom = `${this.zoom[0].toFixed(3)},${this.zoom[1].toFixed(3)}`;
  }

  /** Forget the zoom (double-click) on every chart of the hub. */
  bindReset(): void {
    this.plotEl.addEventListener("dblclick", () => {
      this.zoom = null;
      this.markZoom();
      this.hub.zoomed(this, null, null);
    });
  }

  resize(): void {
    this.plot?.setSize({ width: width(this.el), height: this.height });
  }

  destroy(): void {
    this.plot?.destroy();
    this.plot = null;
    this.hub.charts.delete(this);
  }
}

export function formatValue(v: number): string {
  if (!Number.isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  if (Number.isInteger(v)) return String(v);
  return v.toPrecision(4).replace(/\.?0+$/, "");
}
