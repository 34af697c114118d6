import { describe, expect, it } from "vitest";
import { bucketCounts, growth, isTerminal, parseWeights } from "./data";

describe("flywheel data helpers", () => {
  it("parses merge weights and refuses bad ones", () => {
    expect(parseWeights("0.25, 0.75", 2)).toEqual([0.25, 0.75]);
    expect(() => parseWeights("0.5", 2)).toThrow(/2 weights/);
    expect(() => parseWeights("0.5,0.6", 2)).toThrow(/sum to 1/);
    expect(() => parseWeights("1.5,-0.5", 2)).toThrow(/≥ 0/);
    expect(() => parseWeights("a,b", 2)).toThrow(/numbers/);
  });

  it("orders dataset growth by version", () => {
    const base = { id: 1, name: "", prefixes: 0, v1_rate: null, created_at: "" };
    const rows = growth([
      { ...base, version: 2, sft: 5, ct: 1 },
      { ...base, version: 1, sft: 1, ct: 3 },
    ]);
    expect(rows).toEqual([
      { label: "v1", sft: 1, ct: 3 },
      { label: "v2", sft: 5, ct: 1 },
    ]);
  });

  it("fills missing curriculum buckets and knows terminal states", () => {
    expect(bucketCounts({ "75-100": 2 }).map((b) => b.count)).toEqual([0, 0, 0, 2]);
    expect(isTerminal("cancelled")).toBe(true);
    expect(isTerminal("running")).toBe(false);
  });
});
