// The fleet page: every env host and environment, who holds each (an RL run, an annotation
// session, a flywheel job), health and age, and Watch (read-only noVNC) for desktops. Live: the
// websocket ws/fleet/ sends a snapshot on every registry event and every few seconds.

import "./fleet.css";
import { api } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { duration, filterEnvs, kindsOf, ownerKindLabel, queueState, type Fleet, type FleetEnv, type FleetFilter, type FleetSnapshotEvent } from "./model";
import { openWatch } from "./watch";

/** A pill that says a phrase keeps its words as written (a status pill capitalises each word). */
function sentence(pill: HTMLSpanElement): HTMLSpanElement {
  pill.classList.add("sentence");
  return pill;
}

class FleetPage {
  private fleet: Fleet | null = null;
  private filter: FleetFilter = { kind: "", owner: "", problems: false };
  private retry = 0;
  private readonly el = {
    link: h("span", { class: "muted", "data-testid": "fleet-link" }, "connecting…"),
    counts: h("div", { class: "rc-counts", "data-testid": "fleet-counts" }),
    hosts: h("div", { "data-testid": "fleet-hosts" }),
    queues: h("div", { "data-testid": "fleet-queues" }),
    filters: h("div", { class: "fleet-filters" }),
    envs: h("div", { "data-testid": "fleet-envs" }),
    watch: h("div", { class: "rc-watch", "data-testid": "watch" }),
  };

  constructor(private readonly root: HTMLElement) {}

  async start(): Promise<void> {
    render(
      this.root,
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Overview"), this.el.link), this.el.counts),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Env hosts")), this.el.hosts),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Work queues"), h("small", { class: "muted" }, "messages waiting in each Celery queue and the workers that take them")), this.el.queues),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Environments"), this.el.filters), this.el.envs, this.el.watch),
    );
    this.show(await api<Fleet>("/api/fleet/"));
    this.connect();
  }

  private connect(): void {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${window.location.host}/ws/fleet/`);
    ws.addEventListener("open", () => {
      this.retry = 0;
      this.el.link.textContent = "live";
    });
    ws.addEventListener("message", (msg: MessageEvent<string>) => {
      const event = JSON.parse(msg.data) as FleetSnapshotEvent;
      if (event.type === "fleet.snapshot") this.show(event.fleet);
    });
    ws.addEventListener("close", (ev) => {
      if (ev.code === 4401 || ev.code === 4403) {
        this.el.link.textContent = ev.code === 4401 ? "signed out" : "no access to the fleet";
        return;
      }
      this.retry += 1;
      const delay = Math.min(10_000, 500 * 2 ** Math.min(this.retry, 5));
      this.el.link.textContent = `reconnecting in ${Math.round(delay / 1000)} s`;
      window.setTimeout(() => { this.connect(); }, delay);
    });
  }

  private show(fleet: Fleet): void {
    this.fleet = fleet;
    const c = fleet.counts;
    const count = (n: number | undefined, label: string, testid: string): HTMLElement => h("span", { class: "rc-count", "data-testid": testid }, h("b", {}, n ?? 0), ` ${label}`);
    render(
      this.el.counts,
      count(fleet.hosts.length, "hosts", "count-hosts"),
      count(c.envs, "environments", "count-envs"),
      count(c.leased, "leased", "count-leased"),
      count(c.idle, "idle", "count-idle"),
      count(c.crashed, "crashed", "count-crashed"),
      count(c.unhealthy, "need attention", "count-unhealthy"),
    );
    render(
      this.el.hosts,
      fleet.hosts.length === 0
        ? notice("empty", "No env host is running. `make up` starts one (celery worker with FLYWHEEL_ENV_HOST).")
        : h("table", { class: "data" },
            h("thead", {}, h("tr", {}, ...["Host", "Status", "Last heartbeat", "Environments", "Leased", "Kinds"].map((t) => h("th", {}, t)))),
            h("tbody", {}, ...fleet.hosts.map((host) => h("tr", { "data-testid": `host-${host.name}` },
              h("td", {}, host.name),
              h("td", {}, host.alive ? badge("alive", "running") : badge("lost", "failed")),
              h("td", {}, host.heartbeat_age_s === null ? "none" : `${duration(host.heartbeat_age_s)} ago`),
              h("td", { class: "num" }, host.envs),
              h("td", { class: "num" }, host.leased),
              h("td", {}, host.kinds.join(", ") || "—"),
            )))),
    );
    render(
      this.el.queues,
      h("table", { class: "data" },
        h("thead", {}, h("tr", {}, ...["Queue", "Waiting", "Oldest wait", "State", "Workers", "Processes"].map((t) => h("th", {}, t)))),
        h("tbody", {}, ...fleet.queues.map((q) => {
          const state = queueState(q);
          return h("tr", { "data-testid": `queue-${q.queue}` },
            h("td", {}, h("code", {}, q.queue)),
            h("td", { class: "num" }, q.depth),
            h("td", {}, duration(q.oldest_wait_s)),
            h("td", {}, sentence(badge(state.text, state.tone))),
            h("td", {}, q.workers.join(", ") || "—"),
            h("td", { class: "num" }, q.concurrency),
          );
        }))),
    );
    this.renderFilters(fleet);
    this.renderEnvs();
  }

  private renderFilters(fleet: Fleet): void {
    if (this.el.filters.childElementCount > 0) {
      // keep the user's choices; only add kinds that appeared
      const kindSel = this.el.filters.querySelector<HTMLSelectElement>("select[name=kind]");
      if (kindSel) for (const k of kindsOf(fleet.envs)) if (![...kindSel.options].some((o) => o.value === k)) kindSel.append(h("option", { value: k }, k));
      return;
    }
    const kindSel = h("select", { name: "kind", "data-testid": "filter-kind", "aria-label": "Environment kind" }, h("option", { value: "" }, "every kind"), ...kindsOf(fleet.envs).map((k) => h("option", { value: k }, k)));
    const ownerSel = h("select", { name: "owner", "data-testid": "filter-owner", "aria-label": "Held by" },
      h("option", { value: "" }, "held by anyone or free"), h("option", { value: "free" }, "free (not leased)"),
      h("option", { value: "rl" }, "RL runs"), h("option", { value: "annotation" }, "annotation sessions"), h("option", { value: "flywheel" }, "flywheel jobs"));
    const problems = h("input", { type: "checkbox", "data-testid": "filter-problems" });
    const update = (): void => {
      this.filter = { kind: kindSel.value, owner: ownerSel.value, problems: problems.checked };
      this.renderEnvs();
    };
    for (const el of [kindSel, ownerSel, problems]) el.addEventListener("change", update);
    render(this.el.filters, kindSel, " ", ownerSel, " ", h("label", { class: "field-check" }, problems, " only those that need attention"));
  }

  private renderEnvs(): void {
    if (this.fleet === null) return;
    const rows = filterEnvs(this.fleet.envs, this.filter);
    if (rows.length === 0) {
      render(this.el.envs, notice("empty", this.fleet.envs.length === 0 ? "No environment is registered yet: the env host boots its warm pool within seconds of starting." : "No environment matches these filters."));
      return;
    }
    const head = ["Environment", "Kind", "Host", "State", "Health", "Age", "Boot", "Held by", "Task", "Held for", ""];
    render(
      this.el.envs,
      h("table", { class: "data", "data-testid": "fleet-table" },
        h("thead", {}, h("tr", {}, ...head.map((t) => h("th", {}, t)))),
        h("tbody", {}, ...rows.map((e) => this.row(e)))),
    );
  }

  private row(e: FleetEnv): HTMLTableRowElement {
    const owner = e.lease
      ? h("span", {}, h("small", { class: "muted" }, `${ownerKindLabel(e.lease.owner.kind)}: `), e.lease.owner.url ? h("a", { href: e.lease.owner.url, "data-testid": `owner-${e.env_id}` }, e.lease.owner.label) : h("span", { "data-testid": `owner-${e.env_id}` }, e.lease.owner.label))
      : h("span", { class: "muted" }, "free");
    const watch = h("button", { type: "button", class: "btn btn-small btn-secondary", disabled: !e.watchable, title: e.watchable ? "watch live, read-only" : e.kind === "desktop" ? "this desktop is not live" : "only desktops stream over VNC", "data-testid": `watch-${e.env_id}` }, "Watch");
    watch.addEventListener("click", () => {
      void openWatch(this.el.watch, e.env_id, () => api<{ url: string }>(`/api/fleet/envs/${encodeURIComponent(e.env_id)}/watch/`, { method: "POST" }));
      this.el.watch.scrollIntoView({ block: "nearest" });
    });
    return h("tr", { "data-testid": `env-${e.env_id}` },
      h("td", {}, h("code", {}, e.env_id)),
      h("td", {}, e.kind),
      h("td", {}, e.host),
      h("td", {}, badge(e.state, e.state === "leased" ? "running" : e.state)),
      h("td", { title: e.health_reason }, e.health === "ok" ? badge("ok", "completed") : badge(e.health, "failed"), e.health_reason ? h("small", { class: "muted" }, ` ${e.health_reason}`) : null),
      h("td", {}, duration(e.age_s)),
      h("td", { class: "num" }, e.boot_s === null ? "—" : `${e.boot_s.toFixed(1)} s`),
      h("td", {}, owner),
      h("td", {}, e.lease?.task || "—"),
      h("td", {}, e.lease ? duration(e.lease.age_s) : "—"),
      h("td", {}, watch),
    );
  }
}

export async function mountFleet(root: HTMLElement): Promise<void> {
  await new FleetPage(root).start();
}
