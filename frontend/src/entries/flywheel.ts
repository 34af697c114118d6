// Flywheel: the cycle at a glance (server-rendered), charts, admin actions and live job progress.
import "../flywheel/flywheel.css";
import type { FlywheelData } from "../flywheel/data";
import { mountFlywheel } from "../flywheel/page";

const script = document.getElementById("flywheel-data");
if (script?.textContent) mountFlywheel(document, JSON.parse(script.textContent) as FlywheelData);
