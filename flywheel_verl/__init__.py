"""Flywheel inside verl (issue 23 item 3): optional, imported only where verl 0.9 is installed.

- `agent_loop.FlywheelGUIAgentLoop` (registered as "flywheel_gui"): verl's `AgentLoopBase` for
  multi-turn GUI episodes on Flywheel environments — reset, then per turn: verl's rollout server
  generates from the running token stream (screenshots as image data), the UI-TARS action is parsed
  by Flywheel's grammar (workers.actions), mapped to screen pixels and executed; the next screenshot
  enters as a user turn (response mask 0). It returns prompt ids, response ids, the response mask,
  the rollout log-probs and the verifier's reward (`reward_score`).
- `envs`: where episodes run — `FleetEnvs` leases environments from a Flywheel install through its
  fleet (env hosts on many machines, their Celery queues; needs the install's DATABASE_URL and
  REDIS_URL), `LocalEnvs` runs a workers.envs environment in-process (one machine, CPU exercise).
- `tracking`: a verl `Tracking` backend "flywheel" that streams verl's metrics into a Flywheel run's
  dashboard (POST /api/rl/runs/<id>/metrics/).
- `submit`: the verl config a Flywheel run generates and the `ray job submit` command line.

verl pins transformers < 5.11 while the platform uses 5.23: install verl in its own environment
(docs/scale.md, "verl"); this package imports Flywheel's plain-Python `workers` modules only.
"""
