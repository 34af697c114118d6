import { describe, expect, it } from "vitest";
import { actionOverlay, lastPoint, markScale } from "./draw";
import { clickText, describeAction, draftProblems, fixPoint, newDraft, submitBody, suggestedVerdict } from "./model";

describe("review draft", () => {
  it("lists what is missing, then builds the submit body", () => {
    const d = newDraft([0, 1]);
    expect(draftProblems(d)).toEqual(["Give a verdict for step 1, 2.", "Choose the overall verdict."]);
    expect(suggestedVerdict(d)).toBeNull();
    d.steps.set(0, { verdict: "approve", comment: "", actionText: "" });
    d.steps.set(1, { verdict: "fix", comment: " ", actionText: "" });
    expect(suggestedVerdict(d)).toBe("fix");
    d.verdict = "approve";
    expect(draftProblems(d)).toEqual([
      "Say why in a comment on step 2.",
      "A trajectory with steps marked fix or reject cannot be approved.",
    ]);
    d.steps.set(1, { verdict: "fix", comment: " wrong field ", actionText: " click(start_box='(3,4)') " });
    d.verdict = "fix";
    expect(draftProblems(d)).toEqual([]);
    expect(submitBody(d)).toEqual({
      verdict: "fix",
      comment: "",
      step_verdicts: [
        { index: 0, verdict: "approve", comment: "" },
        { index: 1, verdict: "fix", comment: "wrong field", action_text: "click(start_box='(3,4)')" },
      ],
    });
  });

  it("suggests reject over fix, approve only when every step is approved", () => {
    const d = newDraft([0, 1, 2]);
    d.steps.set(0, { verdict: "fix", comment: "x", actionText: "" });
    d.steps.set(1, { verdict: "reject", comment: "x", actionText: "click(start_box='(1,1)')" });
    d.steps.set(2, { verdict: "approve", comment: "", actionText: "" });
    expect(suggestedVerdict(d)).toBe("reject");
    d.verdict = "reject";
    expect(submitBody(d).step_verdicts[1]).toEqual({ index: 1, verdict: "reject", comment: "x" }); // only fixes carry an action
    for (const i of [0, 1]) d.steps.set(i, { verdict: "approve", comment: "", actionText: "" });
    expect(suggestedVerdict(d)).toBe("approve");
  });

  it("refuses to build a body from an incomplete draft", () => {
    const d = newDraft([0]);
    d.verdict = "approve";
    expect(() => submitBody(d)).toThrow("step 0 has no verdict");
  });

  it("describes actions in one line", () => {
    expect(describeAction({ kind: "click", point: [80.4, 119.6] })).toBe("click (80, 120)");
    expect(describeAction({ kind: "type", text: "hi\n" })).toBe("type “hi⏎”");
    expect(describeAction({ kind: "drag", point: [1, 2], end_point: [3, 4] })).toBe("drag (1, 2) → (3, 4)");
    expect(describeAction({ kind: "hotkey", keys: ["ctrl", "c"] })).toBe("hotkey ctrl+c");
  });
});

describe("action overlay", () => {
  it("draws in the screen's own pixels", () => {
    const svg = actionOverlay([{ kind: "click", point: [80, 120] }, { kind: "type", text: "abc" }], 160, 210);
    expect(svg.getAttribute("viewBox")).toBe("0 0 160 210");
    const mark = svg.querySelector(".rv-mark");
    expect(mark?.getAttribute("cx")).toBe("80");
    expect(mark?.getAttribute("cy")).toBe("120");
    expect(svg.textContent).toContain("“abc”");
  });

  it("notes actions without a target and scales marks with the screen", () => {
    const svg = actionOverlay([{ kind: "finished", text: "done" }], 1280, 720);
    expect(svg.querySelector(".rv-mark")).toBeNull();
    expect(svg.textContent).toBe("finished: done");
    expect(markScale(1280, 720).r).toBeGreaterThan(markScale(160, 210).r);
  });
});

describe("lastPoint", () => {
  it("is where the pointer was left by earlier steps", () => {
    expect(lastPoint([])).toBeNull();
    expect(lastPoint([[{ kind: "click", point: [1, 2] }], [{ kind: "type", text: "x" }]])).toEqual([1, 2]);
    expect(lastPoint([[{ kind: "drag", point: [1, 2], end_point: [5, 6] }]])).toEqual([5, 6]);
  });

  it("places typed text at the focus instead of the corner", () => {
    const svg = actionOverlay([{ kind: "type", text: "Ada" }], 480, 300, [163, 86]);
    const rect = svg.querySelector("rect");
    expect(Number(rect?.getAttribute("x"))).toBeGreaterThan(163);
  });
});

describe("corrected actions", () => {
  it("turn a click on the screenshot into an action and back into a point", () => {
    expect(clickText([12.4, 99.6])).toBe("click(start_box='(12,100)')");
    expect(fixPoint("click(start_box='(12,100)')")).toEqual([12, 100]);
    expect(fixPoint("click(start_box='( 1.5 , 2 )')")).toEqual([1.5, 2]);
    expect(fixPoint("type(content='x')")).toBeNull();
  });
});
