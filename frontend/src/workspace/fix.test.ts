import { describe, expect, it } from "vitest";
import { initialStep, type FixStep } from "./fix";

const step = (index: number): FixStep => ({
  index, number: index + 1, thought: "", action_text: "", screen_actions: [], screenshot_url: "", screen_width: 10, screen_height: 10,
  decision: "accepted", decision_index: 0, decision_number: 1, edited: false, comments: [],
});

describe("initialStep", () => {
  const steps = [step(0), step(1), step(2)];
  it("opens the step the URL names, by the number the user sees", () => {
    expect(initialStep(steps, [1], 3)).toBe(2);
  });
  it("else the first flagged step, else the first", () => {
    expect(initialStep(steps, [2, 1], null)).toBe(1);
    expect(initialStep(steps, [], null)).toBe(0);
    expect(initialStep(steps, [1], 9)).toBe(1);
  });
});
