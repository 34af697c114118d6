// Small SVG charts without a library: bars (optionally stacked) with value labels.
import { h } from "../lib/dom";

const NS = "http://www.w3.org/2000/svg";

function svg(tag: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

export interface BarSeries {
  name: string;
  color: string;
}

export interface BarRow {
  label: string;
  values: number[];
  caption?: string;
}

/** Stacked bars, one per row; `max` fixes the scale (e.g. 1 for rates). */
export function barChart(rows: readonly BarRow[], series: readonly BarSeries[], max?: number): HTMLElement {
  const width = 460;
  const height = 180;
  const pad = { top: 18, bottom: 28, left: 8, right: 8 };
  const top = max ?? Math.max(1, ...rows.map((r) => r.values.reduce((a, b) => a + b, 0)));
  const slot = (width - pad.left - pad.right) / Math.max(1, rows.length);
  const barW = Math.min(56, slot * 0.6);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "fw-chart", role: "img" });
  root.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom, class: "fw-axis" }));
  rows.forEach((row, i) => {
    const x = pad.left + slot * i + (slot - barW) / 2;
    let y = height - pad.bottom;
    row.values.forEach((value, s) => {
      const barH = ((height - pad.top - pad.bottom) * value) / top;
      y -= barH;
      root.append(svg("rect", { x, y, width: barW, height: Math.max(0, barH), fill: series[s]?.color ?? "#888" }));
    });
    root.append(svg("text", { x: x + barW / 2, y: y - 4, "text-anchor": "middle", class: "fw-value" }, row.caption ?? String(row.values.reduce((a, b) => a + b, 0))));
    root.append(svg("text", { x: x + barW / 2, y: height - 10, "text-anchor": "middle", class: "fw-label" }, row.label));
  });
  const legend = h("div", { class: "fw-legend" }, ...series.map((s) => h("span", {}, h("i", { style: `background:${s.color}` }), s.name)));
  const wrap = h("div", { class: "fw-chart-wrap" });
  wrap.append(root, legend);
  return wrap;
}
