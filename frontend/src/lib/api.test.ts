import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, csrfToken, errorMessage, resultsOf } from "./api";

function respond(status: number, body: string): ReturnType<typeof vi.fn> {
  const fetchMock = vi.fn(() => Promise.resolve(new Response(body, { status })));
  vi.stubGlobal("fetch", fetchMock);
  return fetchMock;
}

function sentInit(fetchMock: ReturnType<typeof vi.fn>): RequestInit {
  const call = fetchMock.mock.calls[0] as [string, RequestInit];
  return call[1];
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("csrfToken", () => {
  it("reads the csrftoken cookie among others", () => {
    expect(csrfToken("sessionid=abc; csrftoken=tok%3D1; theme=dark")).toBe("tok=1");
  });
  it("is empty without the cookie", () => {
    expect(csrfToken("sessionid=abc")).toBe("");
  });
});

describe("errorMessage", () => {
  it("uses DRF's detail", () => {
    expect(errorMessage(403, { detail: "Only researchers and admins may export trajectories." })).toBe(
      "Only researchers and admins may export trajectories.",
    );
  });
  it("names the fields of validation errors", () => {
    expect(errorMessage(400, { format: ['"zip" is not a valid choice.'], non_field_errors: ["Bad filters."] })).toBe(
      'format: "zip" is not a valid choice.; Bad filters.',
    );
  });
  it("nests field paths", () => {
    expect(errorMessage(400, { filters: { source: ["Unknown source."] } })).toBe("filters: source: Unknown source.");
  });
  it("says a field error that repeats the detail once", () => {
    const why = "step 2: the corrected action is refused: off screen: click at (40,900) …";
    expect(errorMessage(400, { detail: why, step_verdicts: [{}, { action_text: [why] }] })).toBe(why);
  });
  it("falls back to a sentence for the status", () => {
    expect(errorMessage(404, null)).toBe("Not found");
    expect(errorMessage(502, null)).toBe("The server failed (HTTP 502); try again or tell an admin");
    expect(errorMessage(418, null)).toBe("Request failed (HTTP 418)");
  });
});

describe("api", () => {
  it("GETs JSON without a CSRF header", async () => {
    const fetchMock = respond(200, '{"results": [1, 2]}');
    const body = await api<{ results: number[] }>("/api/tasks/");
    expect(body.results).toEqual([1, 2]);
    const init = sentInit(fetchMock);
    expect(init.method).toBe("GET");
    expect((init.headers as Record<string, string>)["X-CSRFToken"]).toBeUndefined();
    expect(init.credentials).toBe("same-origin");
  });

  it("POSTs JSON with the CSRF header from the cookie", async () => {
    document.cookie = "csrftoken=secret-token";
    const fetchMock = respond(202, '{"id": 7}');
    await api("/api/export-jobs/", { method: "POST", body: { format: "jsonl" } });
    const init = sentInit(fetchMock);
    const headers = init.headers as Record<string, string>;
    expect(headers["X-CSRFToken"]).toBe("secret-token");
    expect(headers["Content-Type"]).toBe("application/json");
    expect(init.body).toBe('{"format":"jsonl"}');
  });

  it("rejects with a readable ApiError on a JSON error", async () => {
    respond(400, '{"format": ["\\"zip\\" is not a valid choice."]}');
    const error = await api("/api/export-jobs/", { method: "POST", body: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(400);
    expect((error as ApiError).message).toBe('format: "zip" is not a valid choice.');
  });

  it("rejects with the status sentence on an HTML error page", async () => {
    respond(500, "<html><body>Server Error</body></html>");
    await expect(api("/api/tasks/")).rejects.toThrow("The server failed (HTTP 500)");
  });

  it("reports an unreachable server", async () => {
    vi.stubGlobal("fetch", vi.fn(() => Promise.reject(new TypeError("Failed to fetch"))));
    await expect(api("/api/tasks/")).rejects.toThrow("Could not reach the server");
  });

  it("accepts an empty success body", async () => {
    respond(204, "");
    await expect(api("/api/x/", { method: "DELETE" })).resolves.toBeNull();
  });
});

describe("resultsOf", () => {
  it("takes paginated and bare lists", () => {
    expect(resultsOf({ results: [1] })).toEqual([1]);
    expect(resultsOf([2])).toEqual([2]);
  });
});
