#!/usr/bin/env bash
# priority.sh CLASS CMD...: run CMD at the CPU priority of its role (docs/scale.md, "CPU priorities").
#   interactive  nice 0   what a person waits on: web, env hosts, live think-aloud, VNC proxy, annotation model
#   normal       nice 5   the default worker (candidates, exports, upkeep), beat, env upkeep
#   low          nice 8   think-aloud full passes
#   background   nice 10  rollouts, training, the runs' policy servers
# The kernel weighs nice 0 : 5 : 8 : 10 as 1024 : 335 : 172 : 110, and idle CPU goes to whoever wants
# it: background work runs at full speed when nobody waits, and yields when somebody does. (At nice
# 15, weight 36, a shared machine's other sessions starved the runs: `bench team`, HISTORY.md.)
#
# With autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1, the default on desktop
# and many server kernels) the CPU is first split evenly between sessions, then by nice within one;
# `make up` starts each process in its own session (setsid), so a process's nice alone changes
# nothing against the others. When CMD leads its session, the session's autogroup gets the same nice
# (/proc/self/autogroup; raising it needs no privilege). Under cgroups (compose) autogroups do not
# apply: docker-compose.yml gives each service the matching cpu_shares.
#
# Priorities are only ever lowered, never raised: under `nice -n 3 make up` interactive work runs at 3.
# FLYWHEEL_PRIORITIES=off runs every class as it was started (nice unchanged, autogroup untouched).
set -euo pipefail

usage() { echo "usage: priority.sh interactive|normal|low|background CMD..." >&2; exit 2; }
[[ $# -ge 2 ]] || usage
case "$1" in
  interactive) level=0 ;;
  normal) level=5 ;;
  low) level=8 ;;
  background) level=10 ;;
  *) usage ;;
esac
shift
if [[ "${FLYWHEEL_PRIORITIES:-on}" == "off" ]]; then exec "$@"; fi

current=$(nice)
(( level > current )) || level=$current
# /proc/PID/stat: "pid (comm) state ppid pgrp session ..."; this script's comm has no spaces.
read -r -a stat < "/proc/$$/stat"
if [[ "${stat[5]}" == "$$" && -w /proc/self/autogroup ]]; then
  # Without CAP_SYS_ADMIN the kernel accepts one autogroup change per 100 ms, machine-wide (EAGAIN):
  # up.sh starts a dozen processes in a row.
  for _ in $(seq 1 50); do
    if echo "$level" 2>/dev/null > /proc/self/autogroup; then break; fi
    sleep 0.05
  done
fi
exec nice -n "$(( level - current ))" "$@"
