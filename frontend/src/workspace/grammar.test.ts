import { describe, expect, it } from "vitest";
import { actionSnippet, applySuggestion, completionContext, pickActionText, quickCheck, sketchAction, suggest } from "./grammar";

function complete(text: string, label: string, hints = {}, explicit = false): { text: string; caret: number } {
  const caret = text.indexOf("|");
  const clean = text.replace("|", "");
  const s = suggest(clean, caret === -1 ? clean.length : caret, hints, explicit).find((x) => x.label === label);
  if (s === undefined) throw new Error(`no suggestion ${label} in ${JSON.stringify(suggest(clean, caret, hints, explicit).map((x) => x.label))}`);
  return applySuggestion(clean, s);
}

describe("completionContext", () => {
  it("knows an action name is being written", () => {
    expect(completionContext("cli", 3)).toEqual({ kind: "action", prefix: "cli", from: 0 });
  });
  it("knows an argument name is being written, and which are used", () => {
    expect(completionContext("drag(start_box='(1,2)', e", 25)).toEqual({ kind: "arg", action: "drag", prefix: "e", from: 24, used: ["start_box"] });
  });
  it("knows a value is being written inside quotes", () => {
    expect(completionContext("scroll(direction='u", 19)).toMatchObject({ kind: "value", action: "scroll", arg: "direction", prefix: "u" });
  });
  it("ignores parentheses inside quoted values", () => {
    expect(completionContext("click(start_box='(1,2)') ", 25)).toMatchObject({ kind: "action", prefix: "" });
  });
});

describe("suggest", () => {
  it("completes action names by prefix, with the last click's coordinates", () => {
    const names = suggest("l", 1).map((s) => s.label);
    expect(names).toEqual(["left_double", "long_press"]);
    expect(complete("cl", "click", { point: [80, 120] })).toEqual({ text: "click(start_box='(80,120)')", caret: 27 });
  });
  it("leaves the caret inside the box when no click is known", () => {
    const out = complete("cl", "click");
    expect(out.text).toBe("click(start_box='()')");
    expect(out.text.slice(0, out.caret)).toBe("click(start_box='(");
  });
  it("fills a drag from the last drag on the screen", () => {
    expect(complete("dr", "drag", { point: [1, 2], endPoint: [30, 40] }).text).toBe("drag(start_box='(1,2)', end_box='(30,40)')");
  });
  it("offers only the arguments the action takes and has not got yet", () => {
    expect(suggest("drag(start_box='(1,2)', ", 24, {}, true).map((s) => s.label)).toEqual(["end_box"]);
    expect(suggest("scroll(", 7, {}, true).map((s) => s.label)).toEqual(["start_box", "direction"]);
  });
  it("offers directions and keys as values", () => {
    expect(complete("scroll(direction='|')", "down").text).toBe("scroll(direction='down')");
    expect(suggest("hotkey(key='ctrl ", 17).map((s) => s.label)).toContain("ctrl c");
  });
  it("closes an unclosed quote when completing a value", () => {
    expect(complete("scroll(direction='le", "left").text).toBe("scroll(direction='left'");
  });
  it("suggests nothing mid-text unless asked", () => {
    expect(suggest("click(start_box='(1,2)') ", 25)).toEqual([]);
    expect(suggest("click(start_box='(1,2)') ", 25, {}, true).length).toBeGreaterThan(10);
  });
  it("writes snippets for argument-less and text actions", () => {
    expect(actionSnippet("wait")).toEqual(["wait()", 6]);
    expect(actionSnippet("type")).toEqual(["type(content='')", 14]);
    expect(actionSnippet("open_app")).toEqual(["open_app(app_name='')", 19]);
  });
});

describe("pickActionText / sketchAction / quickCheck", () => {
  it("writes screen picks as actions", () => {
    expect(pickActionText({ kind: "click", point: [80, 120] })).toBe("click(start_box='(80,120)')");
    expect(pickActionText({ kind: "right_single", point: [1, 2] })).toBe("right_single(start_box='(1,2)')");
    expect(pickActionText({ kind: "drag", point: [1, 2], end: [3, 4] })).toBe("drag(start_box='(1,2)', end_box='(3,4)')");
  });
  it("sketches typed actions for drawing", () => {
    expect(sketchAction("drag(start_box='(1,2)', end_box='(3, 4)')")).toEqual({ kind: "drag", point: [1, 2], end_point: [3, 4] });
    expect(sketchAction("type(content='a\\'b\\n')")).toEqual({ kind: "type", text: "a'b\n" });
    expect(sketchAction("nonsense(1)")).toBeNull();
  });
  it("catches the obvious mistakes before sending", () => {
    expect(quickCheck("click(start_box='(1,2)')")).toBe("");
    expect(quickCheck("")).toMatch(/Write an action/);
    expect(quickCheck("clik(start_box='(1,2)')")).toMatch(/Unknown action "clik"/);
    expect(quickCheck("click(start_box='(1,2)")).toMatch(/not closed/);
  });
});
