// Coordinates between the screen (observation pixels) and what the page displays, and the shapes a
// candidate's actions become on the overlay. Pure functions; the overlay module draws the shapes.

import type { ActionJson } from "../lib/trajectory";

export interface Size {
  width: number;
  height: number;
}

export type Point = [number, number];

/** The largest size with `screen`'s aspect ratio that fits in `box`, upscaled at most `maxScale`×. */
export function fitSize(screen: Size, box: Size, maxScale = 4): Size & { scale: number } {
  if (screen.width <= 0 || screen.height <= 0 || box.width <= 0 || box.height <= 0) {
    return { width: 0, height: 0, scale: 0 };
  }
  const scale = Math.min(box.width / screen.width, box.height / screen.height, maxScale);
  return { width: Math.round(screen.width * scale), height: Math.round(screen.height * scale), scale };
}

/** A screen pixel → a position on the displayed image (same origin, top-left). */
export function screenToDisplay(point: Point, screen: Size, display: Size): Point {
  return [(point[0] * display.width) / screen.width, (point[1] * display.height) / screen.height];
}

/** A position on the displayed image → the screen pixel under it (the pixel whose area holds the
 *  position, clamped to the screen; the epsilon absorbs float error at exact pixel edges). */
export function displayToScreen(point: Point, display: Size, screen: Size): Point {
  const x = Math.floor((point[0] * screen.width) / display.width + 1e-6);
  const y = Math.floor((point[1] * screen.height) / display.height + 1e-6);
  return [clamp(x, 0, screen.width - 1), clamp(y, 0, screen.height - 1)];
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(Math.max(value, low), Math.max(low, high));
}

export type MarkerVariant = "click" | "double" | "right" | "hover" | "long_press";

/** `offscreen`: the action's own point (screen pixels) lies outside the screen; the shape is drawn
 *  at the nearest edge and says so, never as if the edge were meant. `pinned`: a text placed in the
 *  corner's note rows (no pointer position to put it at). */
export type Shape =
  | { type: "marker"; at: Point; label: string; variant: MarkerVariant; offscreen?: string }
  | { type: "arrow"; from: Point; to: Point; label: string; variant: "drag" | "swipe"; offscreen?: string }
  | { type: "scroll"; at: Point; to: Point; label: string; direction: string }
  | { type: "text"; at: Point; label: string; text: string; variant: "type" | "hotkey" | "note"; pinned?: boolean };

/** True when screen pixel `p` is not on the `screen`. */
export function offScreen(p: Point, screen: Size): boolean {
  return !(p[0] >= 0 && p[1] >= 0 && p[0] < screen.width && p[1] < screen.height);
}

function onEdge(p: Point, screen: Size): boolean {
  return p[0] <= 0 || p[1] <= 0 || p[0] >= screen.width - 1 || p[1] >= screen.height - 1;
}

/** Where an off-screen point `p` is drawn: on the screen's border, in the direction of `p` from
 *  the screen's centre (so points off in different directions do not pile up in one corner). */
export function towardEdge(p: Point, screen: Size): Point {
  if (!offScreen(p, screen)) return p;
  const cx = (screen.width - 1) / 2;
  const cy = (screen.height - 1) / 2;
  const dx = p[0] - cx;
  const dy = p[1] - cy;
  const t = Math.min(dx === 0 ? Infinity : Math.abs(cx / dx), dy === 0 ? Infinity : Math.abs(cy / dy));
  return ontoScreen([cx + dx * t, cy + dy * t], screen);
}

/** `p` moved onto the screen's nearest edge pixel. */
export function ontoScreen(p: Point, screen: Size): Point {
  return [clamp(p[0], 0, screen.width - 1), clamp(p[1], 0, screen.height - 1)];
}

const MARKERS: Record<string, MarkerVariant> = {
  click: "click",
  left_double: "double",
  right_single: "right",
  hover: "hover",
  long_press: "long_press",
};

const DIRECTION_VECTORS: Record<string, Point> = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] };

/** Where a scroll / swipe of `direction` from `at` is drawn to, `length` display pixels away. */
export function directionEnd(at: Point, direction: string, length: number): Point {
  const v = DIRECTION_VECTORS[direction] ?? [0, 1];
  return [at[0] + v[0] * length, at[1] + v[1] * length];
}

function noteText(action: ActionJson): string {
  switch (action.kind) {
    case "wait":
      return "wait";
    case "finished":
      return action.text ? `finished: ${action.text}` : "finished";
    case "call_user":
      return action.text ? `call user: ${action.text}` : "call user";
    case "open_app":
      return `open ${action.text ?? "app"}`;
    case "press_home":
      return "home";
    case "press_back":
      return "back";
    default:
      return action.kind;
  }
}

export interface ShapeOptions {
  screen: Size;
  display: Size;
  /** The label drawn on every shape of this candidate (its shortcut key, "1"…"N"). */
  label: string;
  /** Where typed text goes when the candidate does not click first: the last executed point. */
  focus?: Point | null;
  /** Display length of scroll arrows. */
  arrowLength?: number;
  /** First row of this candidate's corner notes (so candidates' notes do not overlap). */
  noteRow?: number;
  /** The server flagged a point outside the screen (it may have moved it onto the edge). */
  clamped?: boolean;
}

/** The overlay shapes of one candidate's `screen_actions`, in display pixels. */
export function actionShapes(actions: readonly ActionJson[], options: ShapeOptions): Shape[] {
  const { screen, display, label } = options;
  const toDisplay = (p: [number, number]): Point => screenToDisplay(towardEdge(p, screen), screen, display);
  const away = (...points: (Point | undefined)[]): { offscreen?: string } => {
    const p = points.find((q) => q !== undefined && offScreen(q, screen));
    if (p !== undefined) return { offscreen: `off screen (${Math.round(p[0])}, ${Math.round(p[1])})` };
    // The server moved the point onto the screen's edge and says so (`clamped`): still not meant there.
    const edge = options.clamped === true && points.some((q) => q !== undefined && onEdge(q, screen));
    return edge ? { offscreen: "off screen (shown at the edge)" } : {};
  };
  const length = options.arrowLength ?? Math.max(28, Math.min(display.width, display.height) * 0.12);
  let cursor: Point | null = options.focus ? toDisplay(options.focus) : null;
  let notes = options.noteRow ?? 0;
  const shapes: Shape[] = [];
  for (const action of actions) {
    const at = action.point ? toDisplay(action.point) : null;
    const marker = MARKERS[action.kind];
    if (marker !== undefined && at !== null) {
      shapes.push({ type: "marker", at, label, variant: marker, ...away(action.point) });
      cursor = at;
    } else if ((action.kind === "drag" || action.kind === "swipe") && at !== null) {
      const to = action.end_point
        ? toDisplay(action.end_point)
        : directionEnd(at, action.direction ?? "up", length);
      shapes.push({ type: "arrow", from: at, to, label, variant: action.kind, ...away(action.point, action.end_point) });
      cursor = to;
    } else if (action.kind === "scroll") {
      const from = at ?? cursor ?? [display.width / 2, display.height / 2];
      shapes.push({
        type: "scroll",
        at: from,
        to: directionEnd(from, action.direction ?? "down", length),
        label,
        direction: action.direction ?? "down",
      });
    } else if (action.kind === "type" || action.kind === "hotkey") {
      const text = action.kind === "type" ? (action.text ?? "") : (action.keys ?? []).join("+");
      if (cursor !== null) shapes.push({ type: "text", at: cursor, label, text, variant: action.kind });
      else shapes.push({ type: "text", at: [8, 8 + 22 * notes++], label, text, variant: action.kind, pinned: true });
    } else {
      shapes.push({ type: "text", at: [8, 8 + 22 * notes++], label, text: noteText(action), variant: "note", pinned: true });
    }
  }
  return shapes;
}
