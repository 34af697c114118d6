// The live screen: one stage sized to the screen's aspect ratio and fitted to the space available.
// The stage holds the observation screenshot, or for desktop tasks the live noVNC canvas in its
// place (same box, on top), and the overlay SVG exactly over both. In proposal mode a click on the
// stage gives a click point, a drag a drag, a double click a double click and a right click a right
// click, all in screen pixels; in take-over the overlay lets the input through to the desktop.

import { h } from "../lib/dom";
import { displayToScreen, fitSize, type Point, type Size } from "./geometry";

export interface ScreenPick {
  kind: "click" | "left_double" | "right_single" | "drag";
  point: Point;
  end?: Point;
}

const DRAG_MIN_PX = 6;
const EDGE_ROOM_PX = 22;
/** Gap kept between the screen area and the viewport's bottom edge. */
const BOTTOM_GAP_PX = 12;
/** The screen area is never shorter than this (a short window scrolls instead). */
const MIN_AREA_PX = 320;
/** Below this width the side panel goes under the screen (workspace.css) and the area's height is CSS's. */
const NARROW = "(max-width: 900px)";

/** The screen area for a screen of `screen` pixels: the stage as large as fits both the area's width
 *  and the viewport's height below the area's top, and the area's height (no taller than the stage
 *  with its edge room needs). Pure, for the tests. */
export function areaLayout(screen: Size, areaWidth: number, roomBelowTop: number): { stage: Size; areaHeight: number } {
  const height = Math.max(MIN_AREA_PX, roomBelowTop - BOTTOM_GAP_PX);
  const fit = fitSize(screen, { width: areaWidth - 2 - 2 * EDGE_ROOM_PX, height: height - 2 - 2 * EDGE_ROOM_PX });
  const areaHeight = fit.height > 0 ? Math.max(MIN_AREA_PX, fit.height + 2 + 2 * EDGE_ROOM_PX) : height;
  return { stage: { width: fit.width, height: fit.height }, areaHeight };
}

export class ScreenView {
  readonly root: HTMLElement;
  readonly stage: HTMLElement;
  readonly img: HTMLImageElement;
  readonly vncHost: HTMLElement;
  readonly svg: SVGSVGElement;
  private screen: Size = { width: 0, height: 0 };
  private display: Size = { width: 0, height: 0 };
  private vncCanvas: (() => HTMLCanvasElement | null) | null = null;
  private picking = true;
  private down: { at: Point; id: number } | null = null;
  private rubber: SVGLineElement | null = null;
  private readonly resize: ResizeObserver;

  constructor(
    private readonly onPick: (pick: ScreenPick) => void,
    private readonly onLayout: () => void,
  ) {
    this.img = h("img", { class: "ws-shot", alt: "The environment's current screen", draggable: "false", "data-testid": "screenshot" });
    this.vncHost = h("div", { class: "ws-vnc", hidden: true, "data-testid": "live-screen" });
    this.svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    this.svg.setAttribute("class", "ws-overlay");
    this.svg.setAttribute("data-testid", "overlay");
    this.stage = h("div", { class: "ws-stage", "data-testid": "screen" }, this.img, this.vncHost);
    this.stage.append(this.svg);
    this.root = h("section", { class: "ws-screen", "aria-label": "Screen" }, this.stage);
    this.img.addEventListener("load", () => {
      this.layout();
    });
    this.resize = new ResizeObserver(() => {
      this.layout();
    });
    // The area's width, and what moves it up or down (a banner, a wrapped instruction, the window).
    this.resize.observe(this.root);
    this.resize.observe(document.body);
    window.addEventListener("resize", () => {
      this.layout();
    });
    this.bindPointer();
  }

  /** Show screenshot `url` of a `size` screen (kept until the new image has loaded: no flicker). */
  showScreenshot(url: string, size: Size): void {
    this.screen = size;
    if (url === "" || this.img.getAttribute("src") === url) {
      this.layout();
      return;
    }
    const next = new Image();
    next.onload = () => {
      this.img.src = url;
    };
    next.onerror = () => {
      this.img.src = url; // let the element show its own broken state
    };
    next.src = url;
    if (this.img.getAttribute("src") === null) this.img.src = url;
  }

  /** Show the live desktop (noVNC's canvas, in the stage's box) in place of the screenshot. */
  useVnc(canvas: () => HTMLCanvasElement | null): void {
    this.vncCanvas = canvas;
    this.vncHost.hidden = false;
    this.img.hidden = true;
    this.stage.classList.add("ws-stage-live");
    this.layout();
  }

  /** Back to the screenshot (the live desktop dropped). */
  useScreenshot(): void {
    this.vncCanvas = null;
    this.vncHost.hidden = true;
    this.img.hidden = false;
    this.stage.classList.remove("ws-stage-live");
    this.layout();
  }

  /** True while the live desktop is shown. */
  get live(): boolean {
    return this.vncCanvas !== null;
  }

  /** Proposal mode (clicks make your action) or take-over (the overlay lets input through). */
  setPicking(picking: boolean): void {
    this.picking = picking;
    this.svg.classList.toggle("ws-overlay-passive", !picking);
  }

  get displaySize(): Size {
    return this.display;
  }

  get screenSize(): Size {
    return this.screen;
  }

  /** Size the stage for the space available: the screenshot, the live canvas and the overlay all
   *  take the stage's box, so a point on the overlay is the same point of the screen in both modes.
   *  The stage fits both the area's width and the viewport's height below the area's top; the area
   *  (and the side panel beside it) takes the stage's height, so no band of it stays empty. */
  layout(): void {
    const main = this.root.parentElement;
    let stage: Size;
    if (main === null || window.matchMedia(NARROW).matches) {
      main?.style.removeProperty("--ws-main-h");
      const box = { width: this.root.clientWidth - 2 - 2 * EDGE_ROOM_PX, height: this.root.clientHeight - 2 - 2 * EDGE_ROOM_PX };
      stage = fitSize(this.screen, box);
    } else {
      const top = this.root.getBoundingClientRect().top + window.scrollY;
      const fit = areaLayout(this.screen, this.root.clientWidth, window.innerHeight - top);
      stage = fit.stage;
      main.style.setProperty("--ws-main-h", `${fit.areaHeight}px`);
    }
    this.stage.style.width = `${stage.width}px`;
    this.stage.style.height = `${stage.height}px`;
    if (stage.width === this.display.width && stage.height === this.display.height) return;
    this.display = { width: stage.width, height: stage.height };
    this.svg.setAttribute("viewBox", `0 0 ${stage.width} ${stage.height}`);
    this.onLayout();
  }

  private local(ev: MouseEvent): Point {
    const rect = this.svg.getBoundingClientRect();
    return [ev.clientX - rect.left, ev.clientY - rect.top];
  }

  private toScreen(p: Point): Point {
    return displayToScreen(p, this.display, this.screen);
  }

  private bindPointer(): void {
    this.svg.addEventListener("pointerdown", (ev) => {
      if (!this.picking || ev.button !== 0 || this.display.width === 0) return;
      ev.preventDefault();
      this.down = { at: this.local(ev), id: ev.pointerId };
      this.svg.setPointerCapture(ev.pointerId);
    });
    this.svg.addEventListener("pointermove", (ev) => {
      if (this.down === null) return;
      const p = this.local(ev);
      const [x0, y0] = this.down.at;
      if (Math.hypot(p[0] - x0, p[1] - y0) < DRAG_MIN_PX) return;
      if (this.rubber === null) {
        this.rubber = document.createElementNS("http://www.w3.org/2000/svg", "line");
        this.rubber.setAttribute("class", "ws-rubber");
        this.svg.append(this.rubber);
      }
      this.rubber.setAttribute("x1", String(x0));
      this.rubber.setAttribute("y1", String(y0));
      this.rubber.setAttribute("x2", String(p[0]));
      this.rubber.setAttribute("y2", String(p[1]));
    });
    this.svg.addEventListener("pointerup", (ev) => {
      if (this.down === null) return;
      const start = this.down.at;
      const end = this.local(ev);
      this.down = null;
      this.rubber?.remove();
      this.rubber = null;
      const moved = Math.hypot(end[0] - start[0], end[1] - start[1]) >= DRAG_MIN_PX;
      if (moved) this.onPick({ kind: "drag", point: this.toScreen(start), end: this.toScreen(end) });
      else this.onPick({ kind: "click", point: this.toScreen(start) });
    });
    this.svg.addEventListener("pointercancel", () => {
      this.down = null;
      this.rubber?.remove();
      this.rubber = null;
    });
    this.svg.addEventListener("dblclick", (ev) => {
      if (!this.picking) return;
      this.onPick({ kind: "left_double", point: this.toScreen(this.local(ev)) });
    });
    this.svg.addEventListener("contextmenu", (ev) => {
      if (!this.picking) return;
      ev.preventDefault();
      this.onPick({ kind: "right_single", point: this.toScreen(this.local(ev)) });
    });
  }
}
