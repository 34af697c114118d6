"""`python -m flywheel_verl.main <hydra overrides>`: verl's PPO trainer with Flywheel's tracking
backend installed and the agent loop importable (the Ray job's entrypoint, submit.py)."""

from __future__ import annotations


def main() -> None:
    from flywheel_verl.tracking import install

    install()
    from verl.trainer.main_ppo import main as verl_main

    verl_main()


if __name__ == "__main__":
    main()
