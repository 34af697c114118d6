import { describe, expect, it } from "vitest";
import { drawOverlay } from "./overlay";
import { candidatesPanel, modeControls } from "./panels";
import type { Candidates } from "./types";

function svg(): SVGSVGElement {
  return document.createElementNS("http://www.w3.org/2000/svg", "svg");
}

describe("drawOverlay", () => {
  it("draws one group per candidate, the highlighted one last and the others dimmed", () => {
    const el = svg();
    drawOverlay(
      el,
      [
        { index: 0, shapes: [{ type: "marker", at: [10, 10], label: "1", variant: "click" }] },
        { index: 1, shapes: [{ type: "arrow", from: [0, 0], to: [5, 5], label: "2", variant: "drag" }] },
      ],
      0,
      [{ type: "marker", at: [3, 3], label: "✎", variant: "click" }],
      () => undefined,
    );
    const groups = [...el.children].map((g) => g.getAttribute("class"));
    expect(groups).toEqual(["ov-cand ov-dim", "ov-cand ov-hl", "ov-own"]);
    expect(el.querySelector(".ov-hl")?.getAttribute("data-index")).toBe("0");
    expect(el.textContent).toContain("✎");
  });
});

describe("candidatesPanel", () => {
  const handlers = { accept: () => undefined, edit: () => undefined, hover: () => undefined };
  const base: Candidates = { obs_version: 2, status: "pending", items: [], error: "", model_ms: null };
  const text = (nodes: ReturnType<typeof candidatesPanel>) =>
    nodes.map((n) => (n instanceof Node ? n.textContent : String(n ?? ""))).join(" ");

  it("says the model is working while pending", () => {
    expect(text(candidatesPanel(base, 3, Date.now(), handlers, true))).toContain("The model is proposing 3 actions");
  });
  it("shows the model's error when it failed", () => {
    expect(text(candidatesPanel({ ...base, status: "failed", error: "PolicyError: timeout" }, 3, 0, handlers, true))).toContain("PolicyError: timeout");
  });
});

describe("modeControls", () => {
  it("shows proposal mode only, for screenshot environments", () => {
    const nodes = modeControls(false, false, false, () => undefined);
    expect(nodes).toHaveLength(1);
    expect((nodes[0] as HTMLElement).dataset.mode).toBe("proposal");
  });
  it("offers take-over on desktops once the live view is up, and says when it is on", () => {
    let toggled = 0;
    const [pill, button] = modeControls(true, true, true, () => (toggled += 1)) as [HTMLElement, HTMLButtonElement];
    expect(pill.dataset.mode).toBe("takeover");
    expect(pill.textContent).toContain("you drive the desktop");
    expect(button.getAttribute("aria-pressed")).toBe("true");
    button.click();
    expect(toggled).toBe(1);
    expect((modeControls(true, false, false, () => undefined)[1] as HTMLButtonElement).disabled).toBe(true);
  });
});
