// Home: the sections of each role the user holds (the server decides which are present).
import { asrModelWidget } from "../widgets/asrModel";
import { exportWidget } from "../widgets/exportPanel";
import { poolsWidget, tasksWidget, trajectoriesWidget } from "../widgets/lists";
import { mountWidgets } from "../widgets/mount";

mountWidgets(document, {
  tasks: tasksWidget,
  trajectories: trajectoriesWidget,
  pools: poolsWidget,
  export: exportWidget,
  "asr-model": asrModelWidget,
});
