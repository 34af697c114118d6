"""Platform layer: environments, action grammar, policies, RL math, ASR — plain Python, no Django.

Only `workers.tasks` (Celery task entry points) may import Django; `workers.envs`, `workers.actions`,
`workers.policy`, `workers.rl` and `workers.asr` must import without it (tests/test_layers.py checks).
"""
