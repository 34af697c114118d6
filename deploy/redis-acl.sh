#!/bin/sh
# The platform's Redis users, one per role, printed as ACL file lines (`make up`: scripts/services.sh;
# docker compose: the redis service). Passwords from REDIS_WEB_PASSWORD, REDIS_WORKER_PASSWORD and
# REDIS_VNCPROXY_PASSWORD. The `default` user (what a client without credentials is) is off.
# web and worker run Celery, Channels and the cache (every key and channel) but no admin command
# (CONFIG, DEBUG, MODULE, ACL, SHUTDOWN...); the VNC proxy only reads grants and appends take-over
# input (workers/envs/vnc/tokens.py, takeover.py).
set -eu
echo "user default off resetpass -@all"
echo "user web on >${REDIS_WEB_PASSWORD:?} ~* &* +@all -@admin"
echo "user worker on >${REDIS_WORKER_PASSWORD:?} ~* &* +@all -@admin"
echo "user vncproxy on >${REDIS_VNCPROXY_PASSWORD:?} resetchannels ~flywheel:vnc:token:* ~flywheel:vnc:input:* -@all +get +xadd +expire +ping +select"
