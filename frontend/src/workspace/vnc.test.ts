import { describe, expect, it } from "vitest";
import { absoluteWsUrl } from "./vnc";

describe("absoluteWsUrl", () => {
  const page = { protocol: "https:", host: "fly.example" };
  it("keeps ws(s) URLs", () => {
    expect(absoluteWsUrl("ws://proxy:6080/websockify?token=t", page)).toBe("ws://proxy:6080/websockify?token=t");
  });
  it("turns http(s) into ws(s)", () => {
    expect(absoluteWsUrl("https://proxy/websockify?token=t", page)).toBe("wss://proxy/websockify?token=t");
    expect(absoluteWsUrl("http://proxy/websockify", page)).toBe("ws://proxy/websockify");
  });
  it("puts a path on the page's host", () => {
    expect(absoluteWsUrl("/vnc/websockify?token=t", page)).toBe("wss://fly.example/vnc/websockify?token=t");
  });
});
