// The review page: the queue at /review/, one trajectory under review at /review/?t=<id>. A link to a
// trajectory the reviewer holds no review of yet (shared, bookmarked, from the queue's URL form)
// offers to claim it; the server says why when it is not open to them.

import "./review.css";
import { ApiError, errorText } from "../lib/api";
import { h, notice, render } from "../lib/dom";
import { mountQueue, take } from "./queue";
import { ReviewView } from "./view";

function offerClaim(el: HTMLElement, id: number): void {
  const claim = h("button", { type: "button", class: "btn", "data-testid": "claim" }, `Claim trajectory #${id} for review`);
  const status = h("div", {});
  claim.addEventListener("click", () => {
    claim.disabled = true;
    take(id)
      .then(() => new ReviewView(el, id).start())
      .catch((err: unknown) => {
        claim.disabled = false;
        render(status, notice("error", errorText(err)));
      });
  });
  render(
    el,
    h("p", {}, h("a", { href: "/review/" }, "← Review queue")),
    h(
      "section",
      { class: "card", "data-testid": "claim-offer" },
      h("h2", {}, `Trajectory #${id}`),
      h("p", {}, "You hold no review of this trajectory yet. Claim it to review it here (it then counts as one of its reviews)."),
      h("div", { class: "rv-actions" }, claim),
      status,
    ),
  );
}

export function mountReview(doc: Document = document): void {
  const el = doc.querySelector<HTMLElement>("[data-review]");
  if (el === null) return;
  const id = Number(new URLSearchParams(doc.location.search).get("t"));
  const failed = (err: unknown): void => {
    el.textContent = "";
    const p = doc.createElement("p");
    p.className = "notice notice-error";
    p.setAttribute("role", "alert");
    p.textContent = err instanceof Error ? err.message : String(err);
    el.append(p);
  };
  if (Number.isInteger(id) && id > 0) {
    new ReviewView(el, id).start().catch((err: unknown) => {
      if (err instanceof ApiError && err.status === 404) offerClaim(el, id);
      else failed(err);
    });
  } else {
    mountQueue(el, (url) => {
      doc.location.assign(url);
    }).catch(failed);
  }
}
