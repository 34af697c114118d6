// The environment fleet: hosts, environments, lease owners, health; Watch a desktop read-only.
import { mountFleet } from "../fleet/page";

const root = document.querySelector<HTMLElement>("[data-fleet-root]");
if (root) void mountFleet(root);
