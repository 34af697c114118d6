"""What every benchmark shares (SPEC §10): seed ranges and Wilson / bootstrap intervals (`stats`), the
typed bench configurations (`config`, `platform_config`), CPU accounting (`cpu`), the rollout figures
(`figures`), a benchmark's own database (`database`) and the processes it owns (`processes`)."""
