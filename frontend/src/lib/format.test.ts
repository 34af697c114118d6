import { describe, expect, it } from "vitest";
import { ago, decisionLabel, decisionNumber, measuredRate, percent, probabilityText, reward, stepNumber, truncate, validation } from "./format";

describe("format", () => {
  it("measuredRate: no figure before the first finished episode", () => {
    expect(measuredRate(0, 0)).toBe("—");
    expect(measuredRate(0, 3)).toBe("0 % of 3");
    expect(measuredRate(0.5, 12)).toBe("50 % of 12");
  });

  it("probabilityText: a candidate's probability in words a glance reads", () => {
    expect(probabilityText(0.623)).toBe("p 62 %");
    expect(probabilityText(0.004)).toBe("p 0.4 %");
    expect(probabilityText(Math.exp(-171))).toBe("p < 0.1 %");
  });

  it("percent", () => {
    expect(percent(0.256)).toBe("26 %");
    expect(percent(0.256, 1)).toBe("25.6 %");
    expect(percent(null)).toBe("—");
    expect(percent(Number.NaN)).toBe("—");
  });
  it("reward and validation", () => {
    expect(reward(null)).toBe("—");
    expect(reward(0.5)).toBe("0.50");
    expect(validation(1)).toBe("V = 1");
    expect(validation(0)).toBe("V = 0");
    expect(validation(null)).toBe("not validated");
  });
  it("ago", () => {
    const now = new Date("2026-03-10T12:00:00Z");
    expect(ago("2026-03-10T11:59:30Z", now)).toBe("just now");
    expect(ago("2026-03-10T11:15:00Z", now)).toBe("45 min ago");
    expect(ago("2026-03-10T07:00:00Z", now)).toBe("5 h ago");
    expect(ago("2026-03-07T12:00:00Z", now)).toBe("3 d ago");
    expect(ago("2025-12-01T00:00:00Z", now)).toBe("2025-12-01");
    expect(ago(null, now)).toBe("—");
    expect(ago("garbage", now)).toBe("—");
    // the API's one format (webapp/timestamps.py): UTC, 6 fractional digits, +00:00
    expect(ago("2026-03-10T11:15:00.000000+00:00", now)).toBe("45 min ago");
    expect(new Date("2026-03-10T11:15:00.123456+00:00").getTime()).toBe(Date.UTC(2026, 2, 10, 11, 15, 0, 123));
  });
  it("truncate", () => {
    expect(truncate("short", 10)).toBe("short");
    expect(truncate("a longer sentence", 8)).toBe("a longe…");
  });
});

describe("numbering", () => {
  it("uses the API's 1-based numbers, else the 0-based indices + 1", () => {
    expect(stepNumber({ index: 0 })).toBe(1);
    expect(stepNumber({ index: 0, number: 1 })).toBe(1);
    expect(decisionNumber({ index: 2, decision_index: 1 })).toBe(2);
    expect(decisionNumber({ index: 2, decision_index: 1, decision_number: 2 })).toBe(2);
    expect(decisionNumber({ index: 2, decision_index: null })).toBeNull();
  });
  it("names the decision with its candidate's number, the same on every page", () => {
    expect(decisionLabel({ index: 0, decision: "accepted", decision_index: 1 })).toBe("accepted 2");
    expect(decisionLabel({ index: 0, decision: "edited", decision_index: 0, decision_number: 1 })).toBe("edited 1");
    expect(decisionLabel({ index: 0, decision: "overridden", decision_index: null })).toBe("overridden");
  });
});
