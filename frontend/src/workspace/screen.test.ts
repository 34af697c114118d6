import { describe, expect, it } from "vitest";
import { areaLayout } from "./screen";

describe("areaLayout", () => {
  const desktop = { width: 1280, height: 800 };

  it("a wide area: the stage takes the width and the area only the height it needs", () => {
    // 1440×960 window with the navigation folded: the area is 984 wide, 700 px to the viewport's bottom
    const { stage, areaHeight } = areaLayout(desktop, 984, 700);
    expect(stage.width).toBe(938);
    expect(stage.height).toBe(586);
    expect(areaHeight).toBe(586 + 2 + 44);
  });

  it("a short viewport: the stage takes the height, the aspect ratio kept", () => {
    // 1280×720: 824 wide, 520 px below the area's top
    const { stage, areaHeight } = areaLayout(desktop, 824, 520);
    expect(stage.height).toBe(520 - 12 - 2 - 44);
    expect(Math.abs(stage.width / stage.height - 1.6)).toBeLessThan(0.01);
    expect(stage.width).toBeLessThanOrEqual(824 - 2 - 44);
    expect(areaHeight).toBe(520 - 12);
  });

  it("a tiny window scrolls rather than shrinking the area below its minimum", () => {
    expect(areaLayout(desktop, 900, 100).areaHeight).toBe(320);
  });

  it("no screen yet: the area keeps the viewport's room", () => {
    expect(areaLayout({ width: 0, height: 0 }, 900, 600)).toEqual({ stage: { width: 0, height: 0 }, areaHeight: 588 });
  });
});
