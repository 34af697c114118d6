"""VNC for live sessions: x11vnc per desktop, one token-checking websocket proxy in front (SPEC §3).

- `server.X11Vnc`: `x11vnc -display :N -rfbport 0 -unixsock PATH -forever -shared -nopw`, started
  by `DesktopEnv.boot()` on a unix socket in the session's private directory (no TCP port; no
  sandbox mounts it); `DesktopEnv.vnc_target` says where it listens, `ensure_vnc()` restarts it.
- `tokens.mint_token(redis, session_id, user_id, target, read_only, ttl_s)`: called by the service
  layer after its permission check; `tokens.revoke_tokens(redis, session_id)` when the lease ends.
- `proxy`: one process per env host (x11vnc's sockets are local to it):
  `python -m workers.envs.vnc.proxy --listen 0.0.0.0:6080 --redis-url redis://...`; noVNC connects to
  `ws://HOST:6080/websockify?token=T`. Read-only tokens have their input dropped by `rfb`.
- `takeover`: input forwarded for read-write tokens, published per session and folded into actions.
"""
