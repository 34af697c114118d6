#!/usr/bin/env bash
# `make down`: stop every process `make up` started, then the platform's own PostgreSQL and Redis
# (their data and var/secrets stay for the next `make up`).
source "$(dirname "$0")/lib.sh"
shopt -s nullglob
for pidfile in "$RUN_DIR"/*.pid; do
  name=$(basename "$pidfile" .pid)
  # A run's policy server removes its own pid file when its run stops: it may be gone by now.
  pid=$(cat "$pidfile" 2>/dev/null) || continue
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    echo "stopped $name"
  fi
  rm -f "$pidfile"
done
stop_platform_redis
stop_platform_postgres
