// Draws the candidates' shapes (geometry.ts) and the annotator's own click / drag on an SVG laid
// over the screen, in display pixels.

import type { MarkerVariant, Point, Shape } from "./geometry";

const NS = "http://www.w3.org/2000/svg";

/** One colour per candidate, by index; the annotator's own action is drawn in black. */
export const CANDIDATE_COLOURS = ["#1f5eff", "#e8590c", "#0ca678", "#ae3ec9", "#d6336c", "#1098ad", "#f59f00", "#5c940d", "#495057"];

export function colourOf(index: number): string {
  return CANDIDATE_COLOURS[index % CANDIDATE_COLOURS.length] ?? "#1f5eff";
}

function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  ...children: (SVGElement | string)[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child);
  return el;
}

const VARIANT_TAG: Record<MarkerVariant, string> = {
  click: "",
  double: "×2",
  right: "R",
  hover: "hover",
  long_press: "hold",
};

function arrowHead(id: string, colour: string): SVGMarkerElement {
  return s(
    "marker",
    { id, viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
    s("path", { d: "M0,0 L10,5 L0,10 z", fill: colour }),
  );
}

function badge(at: Point, label: string, colour: string, dashed = false): SVGGElement {
  const [x, y] = at;
  return s(
    "g",
    { class: "ov-badge" },
    s("circle", { cx: x, cy: y, r: 12, fill: dashed ? "#fff" : colour, stroke: dashed ? colour : "#fff", "stroke-width": 2.5 }),
    s("text", { x, y: y + 4.5, "text-anchor": "middle", fill: dashed ? colour : "#fff", "font-size": 13, "font-weight": 700 }, label),
  );
}

/** The overlay's own size (its viewBox): tags are kept inside it. */
let bounds: { width: number; height: number } = { width: Infinity, height: Infinity };

function tag(at: Point, text: string, colour: string, cls = "ov-tag"): SVGGElement {
  const width = 8 + Array.from(text).length * 7.3; // monospace 12 px (workspace.css .ov-tag)
  const x = Math.max(0, Math.min(at[0], bounds.width - width));
  const y = Math.max(0, Math.min(at[1], bounds.height - 18));
  return s(
    "g",
    { class: cls },
    s("rect", { x, y, width, height: 18, rx: 4, fill: "#fff", stroke: colour, "stroke-width": 1.5 }),
    s("text", { x: x + 4, y: y + 13, fill: colour, "font-size": 12 }, text),
  );
}

/** Where a marker drawn at the edge for an off-screen point says so: inside the screen from it. */
function offscreenTag(at: Point, text: string, colour: string, slot: number): SVGGElement {
  const width = 8 + Array.from(text).length * 7.3;
  // Inward from the edge, one row per candidate so notes near one another stay readable.
  const row = 22 * (slot % 4);
  const inward: Point = [at[0] > bounds.width / 2 ? at[0] - width - 24 : at[0] + 24, at[1] > bounds.height / 2 ? at[1] - 44 - row : at[1] + 26 + row];
  return tag(inward, text, colour, "ov-tag ov-offscreen");
}

function clip(text: string, max = 32): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Where a marker's number sits around its point, by candidate (NE, SE, SW, NW): candidates that
 *  pick the same point (e.g. clamped to a corner) keep their numbers readable. */
const BADGE_SLOTS: readonly Point[] = [[16, -16], [16, 16], [-16, 16], [-16, -16]];

/** SVG of one set of shapes (a candidate's, or the annotator's own with `own`); `slot` picks where
 *  marker numbers sit. */
export function shapesGroup(shapes: readonly Shape[], colour: string, id: string, own = false, slot = 0): SVGGElement {
  const offset = BADGE_SLOTS[slot % BADGE_SLOTS.length] ?? [16, -16];
  const head = `${id}-head`;
  const group = s("g", {}, s("defs", {}, arrowHead(head, colour)));
  const stroke = { stroke: colour, "stroke-width": 3, fill: "none", "stroke-linecap": "round" };
  for (const shape of shapes) {
    if (shape.type === "marker") {
      const [x, y] = shape.at;
      const away = shape.offscreen !== undefined;
      group.append(s("circle", { cx: x, cy: y, r: 18, ...stroke, "stroke-width": 2, "stroke-dasharray": own || away ? "4 3" : "none", class: "ov-halo" }));
      if (shape.offscreen !== undefined) group.append(offscreenTag(shape.at, shape.offscreen, colour, slot));
      if (shape.variant === "double") group.append(s("circle", { cx: x, cy: y, r: 23, ...stroke, "stroke-width": 2 }));
      group.append(s("line", { x1: x - 4, y1: y, x2: x + 4, y2: y, stroke: colour, "stroke-width": 1.5 }));
      group.append(badge([x + offset[0], y + offset[1]], shape.label, colour, own));
      const variant = VARIANT_TAG[shape.variant];
      if (variant !== "") group.append(tag([x + 30, y - 25], variant, colour));
    } else if (shape.type === "arrow" || shape.type === "scroll") {
      const from = shape.type === "arrow" ? shape.from : shape.at;
      group.append(
        s("line", { x1: from[0], y1: from[1], x2: shape.to[0], y2: shape.to[1], ...stroke, "marker-end": `url(#${head})`, "stroke-dasharray": shape.type === "scroll" ? "6 4" : "none" }),
        s("circle", { cx: from[0], cy: from[1], r: 5, fill: colour }),
        badge([from[0] - 16, from[1] - 16], shape.label, colour, own),
      );
      if (shape.type === "scroll") group.append(tag([shape.to[0] + 6, shape.to[1] - 9], `scroll ${shape.direction}`, colour));
      else if (shape.variant === "swipe") group.append(tag([shape.to[0] + 6, shape.to[1] - 9], "swipe", colour));
      if (shape.type === "arrow" && shape.offscreen !== undefined) group.append(offscreenTag(shape.to, shape.offscreen, colour, slot));
    } else {
      const prefix = shape.variant === "type" ? "⌨ " : shape.variant === "hotkey" ? "⌘ " : `${shape.label}: `;
      const text = shape.variant === "type" ? `“${clip(shape.text.replace(/\n/g, "⏎"))}”` : clip(shape.text);
      const at: Point = shape.pinned === true || shape.variant === "note" ? shape.at : [shape.at[0] + 14, shape.at[1] + 14];
      group.append(tag(at, prefix + text, colour));
    }
  }
  return group;
}

export interface OverlayLayer {
  index: number;
  shapes: Shape[];
}

/** Redraw the overlay: every candidate's layer (the highlighted one on top, the others faded when
 *  one is highlighted), then the annotator's own action. */
export function drawOverlay(
  svg: SVGSVGElement,
  layers: readonly OverlayLayer[],
  highlighted: number | null,
  own: Shape[] | null,
  onHover: (index: number | null) => void,
): void {
  svg.replaceChildren();
  const box = svg.viewBox.baseVal as SVGRect | null;
  bounds = box !== null && box.width > 0 ? { width: box.width, height: box.height } : { width: Infinity, height: Infinity };
  const ordered = [...layers].sort((a, b) => (a.index === highlighted ? 1 : 0) - (b.index === highlighted ? 1 : 0));
  for (const layer of ordered) {
    const g = shapesGroup(layer.shapes, colourOf(layer.index), `ov-c${layer.index}`, false, layer.index);
    g.setAttribute("class", `ov-cand${highlighted === null ? "" : layer.index === highlighted ? " ov-hl" : " ov-dim"}`);
    g.dataset.index = String(layer.index);
    g.addEventListener("pointerenter", () => {
      onHover(layer.index);
    });
    g.addEventListener("pointerleave", () => {
      onHover(null);
    });
    svg.append(g);
  }
  if (own !== null) {
    const g = shapesGroup(own, "#111", "ov-own", true);
    g.setAttribute("class", "ov-own");
    svg.append(g);
  }
}
