"""A new install's demo data and starter model: `manage.py demo_setup` (one user per role, the demo
pools, the annotator's assignments) and `manage.py policy_starter`. It builds on every app, so it sits
above them in the import layers ([tool.importlinter] in pyproject.toml); no app imports it."""
