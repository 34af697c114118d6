// Tiny client for the Django REST API: same-origin session auth, CSRF header on writes,
// and errors turned into sentences a person can read.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The answer's JSON body, when it had one (e.g. an import's per-file report on 400). */
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Django's CSRF token from the `csrftoken` cookie ("" when absent). */
export function csrfToken(cookie: string = document.cookie): string {
  for (const part of cookie.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === "csrftoken") return decodeURIComponent(rest.join("="));
  }
  return "";
}

const STATUS_TEXT: Record<number, string> = {
  400: "The request was not valid",
  401: "You are signed out; sign in again",
  403: "You do not have permission to do this",
  404: "Not found",
  405: "This action is not allowed here",
  429: "Too many requests; wait a moment and retry",
};

function flatten(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(flatten);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).flatMap(([key, inner]) => {
      const texts = flatten(inner);
      if (key === "detail" || key === "non_field_errors") return texts;
      return texts.map((text) => `${key}: ${text}`);
    });
  }
  return [];
}

/** A readable message for an error response: DRF's `detail` / field errors, else the status. */
export function errorMessage(status: number, body: unknown): string {
  // A field error that repeats the `detail` (the API names the field beside it) is said once.
  const texts = flatten(body).filter((text, i, all) => !all.slice(0, i).some((before) => text.endsWith(`: ${before}`)));
  if (texts.length > 0) return texts.join("; ");
  if (typeof STATUS_TEXT[status] === "string") return STATUS_TEXT[status];
  if (status >= 500) return `The server failed (HTTP ${status}); try again or tell an admin`;
  return `Request failed (HTTP ${status})`;
}

/** The text to show for anything thrown (an ApiError's message, or the value itself). */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  body?: unknown;
  signal?: AbortSignal;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Fetch JSON from the API; rejects with ApiError carrying a readable message. */
export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (!SAFE_METHODS.has(method)) headers["X-CSRFToken"] = csrfToken();
  const init: RequestInit = { method, headers, credentials: "same-origin" };
  if (options.body instanceof FormData) {
    init.body = options.body; // multipart: the browser writes the boundary
  } else if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  if (options.signal) init.signal = options.signal;

  let response: Response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "Could not reach the server; check your connection");
  }
  const text = await response.text();
  let body: unknown = null;
  if (text !== "") {
    try {
      body = JSON.parse(text);
    } catch {
      body = null; // an HTML error page: fall back to the status text
    }
  }
  if (!response.ok) throw new ApiError(response.status, errorMessage(response.status, body), body);
  return body as T;
}

/** The rows of a list endpoint, paginated (`{results}`) or not (a bare array). */
export function resultsOf<T>(body: T[] | { results: T[] }): T[] {
  return Array.isArray(body) ? body : body.results;
}
