import { describe, expect, it } from "vitest";
import { closedSummary, formatReward, OutcomePanel, resultText, resultTone } from "./outcome";
import type { Decision, SessionState } from "./types";

const state = (status = "active", envDone = false): SessionState => ({
  id: 1, status, error: "", task: { id: 1, external_id: "t", instruction: "i", env_kind: "browser", pool: "p" },
  trajectory_id: 1, track: "expert", policy: { model: "m", profile: "embedded", n: 3 },
  observation: { obs_version: 1, screenshot_url: "", width: 10, height: 10, clock: 0, reward: 0.5, env_done: envDone },
  candidates: { obs_version: 1, status: "pending", items: [], error: "", model_ms: null }, steps: [],
});

function button(root: HTMLElement, text: string): HTMLButtonElement {
  const found = [...root.querySelectorAll("button")].find((b) => b.textContent.trim() === text);
  if (found === undefined) throw new Error(`no button ${text}`);
  return found;
}

describe("OutcomePanel", () => {
  it("keeps the typed answer across redraws and sends it with the thought", async () => {
    const sent: Omit<Decision, "obs_version">[] = [];
    const panel = new OutcomePanel({
      writeOwn: () => undefined, submit: () => undefined, abandon: () => undefined, takeNext: () => undefined,
      decide: (body) => {
        sent.push(body);
        return Promise.resolve(false); // refused: the form stays as typed
      },
    });
    panel.update(state(), false);
    button(panel.root, "Finish with answer").click();
    const answer = panel.root.querySelector<HTMLInputElement>("#ws-answer");
    const thought = panel.root.querySelector<HTMLTextAreaElement>("#ws-outcome-thought");
    if (answer === null || thought === null) throw new Error("no form");
    answer.value = "42";
    thought.value = " found it ";
    panel.update(state(), true); // e.g. candidates arrived while typing
    panel.update(state(), false);
    expect(panel.root.querySelector<HTMLInputElement>("#ws-answer")?.value).toBe("42");
    button(panel.root, "Finish").click();
    await Promise.resolve();
    expect(sent).toEqual([{ kind: "finish", thought: "found it", answer: "42" }]);
    expect(panel.root.querySelector<HTMLInputElement>("#ws-answer")?.value).toBe("42");
  });

  it("marks infeasible without an answer", () => {
    const sent: Omit<Decision, "obs_version">[] = [];
    const panel = new OutcomePanel({
      writeOwn: () => undefined, submit: () => undefined, abandon: () => undefined, takeNext: () => undefined,
      decide: (body) => {
        sent.push(body);
        return Promise.resolve(true);
      },
    });
    panel.update(state(), false);
    button(panel.root, "Infeasible").click();
    button(panel.root, "Mark infeasible").click();
    expect(sent).toEqual([{ kind: "infeasible", thought: "" }]);
  });

  it("says the episode is over, and what happened once closed", () => {
    const panel = new OutcomePanel({ writeOwn: () => undefined, submit: () => undefined, abandon: () => undefined, takeNext: () => undefined, decide: () => Promise.resolve(true) });
    panel.update(state("active", true), false);
    expect(panel.root.textContent).toContain("episode is over. Submit it");
    panel.update(state("submitted"), false);
    expect(panel.root.textContent).toContain("queued for review");
  });

  it("formats rewards", () => {
    expect([formatReward(1), formatReward(0.99516)]).toEqual(["1", "1.00"]);
  });
  it("shows the stored result after Finish, and a needs-fix session in its own tone with the way to fix", () => {
    const panel = new OutcomePanel({ writeOwn: () => undefined, submit: () => undefined, abandon: () => undefined, takeNext: () => undefined, decide: () => Promise.resolve(true) });
    panel.update({ ...state("submitted"), result: { final_reward: 1, success: true, status: "completed", review_state: "pending" } }, false);
    expect(panel.root.querySelector("[data-testid=result]")?.textContent).toBe("Result: success — final reward 1.");
    expect(panel.root.querySelector("[data-testid=done]")?.className).toContain("ws-done-ok");
    panel.update(state("needs_fix"), false);
    expect(panel.root.querySelector("[data-testid=done]")?.className).toContain("ws-done-warn");
    expect(panel.root.querySelector<HTMLAnchorElement>("[data-testid=open-fix]")?.getAttribute("href")).toBe("/workspace/fix/1/");
  });
  it("words every closed state", () => {
    expect(closedSummary("rejected", null).tone).toBe("bad");
    expect(closedSummary("in_review", null).tone).toBe("info");
    expect(resultText({ final_reward: 0, success: false, status: "completed", review_state: "pending" })).toBe("Result: not solved — final reward 0.");
    expect(resultText({ final_reward: null, success: null, status: "abandoned", review_state: "none" })).toBe("Result: not scored (abandoned).");
    expect(resultTone({ final_reward: 0, success: false, status: "completed", review_state: "pending" })).toBe("bad");
    expect(resultTone({ final_reward: 1, success: true, status: "completed", review_state: "pending" })).toBe("ok");
    expect(resultTone({ final_reward: null, success: null, status: "abandoned", review_state: "none" })).toBe("plain");
  });
});
