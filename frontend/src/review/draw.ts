// The executed action drawn over a step's screenshot: an SVG whose viewBox is the screen's own
// pixels, so it scales with the image at any size (filmstrip thumbnail or the large view).

import { h } from "../lib/dom";
import { stepNumber, type Numbered } from "../lib/format";
import type { ActionJson } from "../lib/trajectory";
import { towardEdge } from "../workspace/geometry";

const NS = "http://www.w3.org/2000/svg";
const POINTER_MARKS: Record<string, string> = {
  click: "",
  left_double: "×2",
  right_single: "R",
  hover: "hover",
  long_press: "hold",
};
const DIRECTIONS: Record<string, [number, number]> = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] };

function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Sizes of the marks in screen pixels, proportional to the screen so they read at any zoom (about
 *  13 px of text when the screen is shown 600 px wide). */
export function markScale(width: number, height: number): { r: number; stroke: number; font: number } {
  const unit = Math.max(width, height) / 100;
  return { r: Math.max(3, unit * 3.2), stroke: Math.max(1, unit * 0.6), font: Math.max(4, unit * 2.2) };
}

/** A label's text cut to fit `room` screen pixels at `font` (monospace-ish advance 0.62 em). */
export function fitLabel(text: string, font: number, room: number): string {
  const max = Math.max(4, Math.floor((room - font * 0.8) / (font * 0.62)));
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** A label inside the `width`×`height` screen: cut to the room there is, moved left / up to stay in. */
function label(x: number, y: number, full: string, font: number, colour: string, screen: [number, number]): SVGGElement {
  const [sw, sh] = screen;
  const text = fitLabel(full, font, sw - 2);
  const width = font * 0.62 * text.length + font * 0.8;
  const height = font * 1.4;
  x = Math.max(0, Math.min(x, sw - width));
  y = Math.max(0, Math.min(y, sh - height));
  const g = s("g", { class: "rv-label" });
  if (text !== full) g.append(s("title", {}, full));
  g.append(
    s("rect", { x, y, width, height, rx: font * 0.3, fill: "#fff", stroke: colour, "stroke-width": font * 0.1 }),
    s("text", { x: x + font * 0.4, y: y + font * 1.05, "font-size": font, fill: colour, "font-weight": 700 }, text),
  );
  return g;
}

/** The last pointer position of `steps` (each a list of actions): where typing goes when the next
 *  step types without clicking first. */
export function lastPoint(steps: readonly (readonly ActionJson[])[]): [number, number] | null {
  for (let i = steps.length - 1; i >= 0; i--) {
    const actions = steps[i] ?? [];
    for (let j = actions.length - 1; j >= 0; j--) {
      const a = actions[j];
      const p = a?.end_point ?? a?.point;
      if (p !== undefined) return p;
    }
  }
  return null;
}

/** An <svg> drawing `actions` on a `width`×`height` screen; `focus` is where the pointer already
 *  is (typed text is drawn there when the step does not click first). */
export function actionOverlay(
  actions: readonly ActionJson[],
  width: number,
  height: number,
  focus: [number, number] | null = null,
  colour = "#e8590c",
): SVGSVGElement {
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", class: "rv-overlay" });
  const { r, stroke, font } = markScale(width, height);
  let cursor: [number, number] | null = focus;
  let noteRow = 0;
  const screen: [number, number] = [width, height];
  const note = (text: string): void => {
    svg.append(label(font * 0.4, font * 0.4 + noteRow * font * 1.7, text, font, colour, screen));
    noteRow += 1;
  };
  for (const a of actions) {
    const mark = POINTER_MARKS[a.kind];
    if (a.point && mark !== undefined) {
      const [px, py] = a.point;
      const away = px < 0 || py < 0 || px >= width || py >= height;
      // A point outside the screen is drawn at the nearest edge and says so (never as if meant there).
      const [x, y] = towardEdge([px, py], { width, height });
      if (away) svg.append(label(x + r, y - r - font, `off screen (${Math.round(px)}, ${Math.round(py)})`, font, colour, [width, height]));
      svg.append(
        s("circle", { cx: x, cy: y, r, fill: "none", stroke: colour, "stroke-width": stroke, class: "rv-mark" }),
        s("circle", { cx: x, cy: y, r: stroke * 1.2, fill: colour }),
      );
      if (mark !== "") svg.append(label(x + r, y - r - font, mark, font, colour, screen));
      cursor = [x, y];
    } else if (a.point && (a.kind === "drag" || a.kind === "swipe" || a.kind === "scroll")) {
      const [x, y] = a.point;
      const v = DIRECTIONS[a.direction ?? "down"] ?? [0, 1];
      const length = r * 3;
      const [tx, ty] = a.end_point ?? [x + v[0] * length, y + v[1] * length];
      svg.append(
        s("line", { x1: x, y1: y, x2: tx, y2: ty, stroke: colour, "stroke-width": stroke, "stroke-dasharray": a.kind === "scroll" ? `${stroke * 3} ${stroke * 2}` : "none" }),
        s("circle", { cx: x, cy: y, r: stroke * 1.6, fill: colour }),
        s("circle", { cx: tx, cy: ty, r: stroke * 2.4, fill: "none", stroke: colour, "stroke-width": stroke }),
      );
      if (a.kind === "scroll") svg.append(label(tx + stroke * 3, ty - font * 0.7, `scroll ${a.direction ?? ""}`, font, colour, screen));
      cursor = [tx, ty];
    } else if (a.kind === "type" || a.kind === "hotkey") {
      const text = a.kind === "type" ? `⌨ “${(a.text ?? "").replace(/\n/g, "⏎")}”` : `⌘ ${(a.keys ?? []).join("+")}`;
      if (cursor !== null) svg.append(label(cursor[0] + r, cursor[1] + r, text, font, colour, screen));
      else note(text);
    } else {
      note(a.text ? `${a.kind}: ${a.text}` : a.kind);
    }
  }
  return svg;
}

/** What a step needs to be shown: its screenshot and screen size, the actions it executed. */
export interface ShotStep extends Numbered {
  readonly screen_width: number | null;
  readonly screen_height: number | null;
  readonly screenshot_url: string;
  readonly screen_actions: readonly ActionJson[];
}

/** A step's screenshot (or "no screenshot") at the screen's aspect ratio with its executed action
 *  drawn on it; `focus` is the previous pointer position, for the arrow into this step's action. */
export function stepShot(step: ShotStep, cls: string, focus: [number, number] | null): HTMLElement {
  const w = step.screen_width ?? 0;
  const hgt = step.screen_height ?? 0;
  const style = w > 0 && hgt > 0 ? `aspect-ratio: ${w} / ${hgt}; --ar: ${(w / hgt).toFixed(4)}` : null;
  const box = h("div", { class: `rv-shot ${cls}`, style });
  if (step.screenshot_url !== "") box.append(h("img", { src: step.screenshot_url, alt: `Screen before step ${stepNumber(step)}` }));
  else box.append(h("div", { class: "rv-noshot" }, "no screenshot"));
  if (w > 0 && hgt > 0) box.append(actionOverlay(step.screen_actions, w, hgt, focus));
  return box;
}
