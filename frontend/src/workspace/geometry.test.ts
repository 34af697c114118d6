import { describe, expect, it } from "vitest";
import { actionShapes, directionEnd, displayToScreen, fitSize, offScreen, screenToDisplay, towardEdge } from "./geometry";

describe("fitSize", () => {
  it("scales a small screen up to fill the box, keeping the aspect ratio", () => {
    expect(fitSize({ width: 160, height: 210 }, { width: 800, height: 630 })).toEqual({ width: 480, height: 630, scale: 3 });
  });
  it("scales a large screen down", () => {
    expect(fitSize({ width: 1920, height: 1080 }, { width: 960, height: 900 })).toEqual({ width: 960, height: 540, scale: 0.5 });
  });
  it("caps the upscale", () => {
    expect(fitSize({ width: 100, height: 100 }, { width: 1000, height: 1000 }, 2).width).toBe(200);
  });
  it("gives nothing for an empty screen or box", () => {
    expect(fitSize({ width: 0, height: 0 }, { width: 10, height: 10 }).scale).toBe(0);
  });
});

describe("screen ↔ display", () => {
  const screen = { width: 160, height: 210 };
  const display = { width: 480, height: 630 };
  it("maps screen pixels to display pixels", () => {
    expect(screenToDisplay([80, 120], screen, display)).toEqual([240, 360]);
  });
  it("maps a display position back to the screen pixel under it", () => {
    expect(displayToScreen([241, 361], display, screen)).toEqual([80, 120]);
    expect(displayToScreen([242.9, 362.9], display, screen)).toEqual([80, 120]);
    expect(displayToScreen([243, 363], display, screen)).toEqual([81, 121]);
  });
  it("clamps positions outside the image to the screen", () => {
    expect(displayToScreen([-5, 700], display, screen)).toEqual([0, 209]);
  });
  it("round-trips every pixel of the screen", () => {
    for (const p of [[0, 0], [159, 209], [37, 101]] as [number, number][]) {
      expect(displayToScreen(screenToDisplay(p, screen, display), display, screen)).toEqual(p);
    }
  });
});

describe("actionShapes", () => {
  const base = { screen: { width: 100, height: 100 }, display: { width: 200, height: 200 }, label: "2" };
  it("numbers a click marker at the scaled point", () => {
    expect(actionShapes([{ kind: "click", point: [10, 20] }], base)).toEqual([{ type: "marker", at: [20, 40], label: "2", variant: "click" }]);
  });
  it("keeps double and right clicks apart", () => {
    const shapes = actionShapes([{ kind: "left_double", point: [1, 1] }, { kind: "right_single", point: [2, 2] }], base);
    expect(shapes.map((s) => (s.type === "marker" ? s.variant : s.type))).toEqual(["double", "right"]);
  });
  it("draws a drag as an arrow from start to end", () => {
    expect(actionShapes([{ kind: "drag", point: [10, 10], end_point: [50, 60] }], base)).toEqual([
      { type: "arrow", from: [20, 20], to: [100, 120], label: "2", variant: "drag" },
    ]);
  });
  it("draws a scroll from its point in its direction", () => {
    const [shape] = actionShapes([{ kind: "scroll", point: [50, 50], direction: "up" }], { ...base, arrowLength: 30 });
    expect(shape).toEqual({ type: "scroll", at: [100, 100], to: [100, 70], label: "2", direction: "up" });
  });
  it("puts typed text next to the click before it", () => {
    const shapes = actionShapes([{ kind: "click", point: [10, 10] }, { kind: "type", text: "hello" }], base);
    expect(shapes[1]).toEqual({ type: "text", at: [20, 20], label: "2", text: "hello", variant: "type" });
  });
  it("puts typed text at the focus (the last executed point) when there is no click", () => {
    const shapes = actionShapes([{ kind: "type", text: "hi" }], { ...base, focus: [30, 40] });
    expect(shapes[0]).toMatchObject({ type: "text", at: [60, 80] });
  });
  it("shows hotkeys and notes", () => {
    const shapes = actionShapes([{ kind: "hotkey", keys: ["ctrl", "c"] }, { kind: "finished", text: "42" }], { ...base, noteRow: 1 });
    expect(shapes[0]).toMatchObject({ type: "text", text: "ctrl+c", variant: "hotkey", at: [8, 30], pinned: true });
    expect(shapes[1]).toMatchObject({ type: "text", text: "finished: 42", variant: "note", at: [8, 52] });
  });
  it("draws an off-screen point at the nearest edge and says where it was", () => {
    const [shape] = actionShapes([{ kind: "click", point: [5000, 50] }], base);
    expect(shape).toMatchObject({ type: "marker", label: "2", variant: "click", offscreen: "off screen (5000, 50)" });
    expect(shape?.type === "marker" && shape.at[0]).toBe(198); // on the right edge, level with the point
    const [drag] = actionShapes([{ kind: "drag", point: [10, 10], end_point: [10, -40] }], base);
    expect(drag).toMatchObject({ type: "arrow", offscreen: "off screen (10, -40)" });
    expect(drag?.type === "arrow" && drag.to[1]).toBe(0); // on the top edge
    const [edge] = actionShapes([{ kind: "click", point: [99, 40] }], { ...base, clamped: true });
    expect(edge).toMatchObject({ offscreen: "off screen (shown at the edge)" });
    expect(offScreen([99, 99], base.screen)).toBe(false);
    // Far off in two directions: two different edge points, not one corner.
    const a = towardEdge([529, 1202], { width: 160, height: 210 });
    const b = towardEdge([1118, 659], { width: 160, height: 210 });
    expect(a[1]).toBe(209);
    expect(b[0]).toBe(159);
    expect(a).not.toEqual(b);
    expect(offScreen([100, 0], base.screen)).toBe(true);
  });
  it("direction ends go the right way", () => {
    expect(directionEnd([0, 0], "right", 5)).toEqual([5, 0]);
    expect(directionEnd([0, 0], "down", 5)).toEqual([0, 5]);
  });
});
