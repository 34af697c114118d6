"""`python -m workers.policy.server`: see workers.policy.server.cli."""

from workers.policy.server.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
