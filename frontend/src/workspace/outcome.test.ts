import { describe, expect, it } from "vitest";
import { formatReward, OutcomePanel } from "./outcome";
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
    expect(panel.root.textContent).toContain("episode is over (reward 0.50)");
    panel.update(state("submitted"), false);
    expect(panel.root.textContent).toContain("queued for review");
  });

  it("formats rewards", () => {
    expect([formatReward(1), formatReward(0.99516)]).toEqual(["1", "1.00"]);
  });
});
