import { describe, expect, it } from "vitest";
import { ago, percent, reward, truncate, validation } from "./format";

describe("format", () => {
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
  });
  it("truncate", () => {
    expect(truncate("short", 10)).toBe("short");
    expect(truncate("a longer sentence", 8)).toBe("a longe…");
  });
});
