"""VNC for live sessions: x11vnc per desktop, one token-checking websocket proxy in front (SPEC §3).

- `server.X11Vnc`: `x11vnc -display :N -localhost -forever -shared -nopw -rfbport P`, started by
  `DesktopEnv.boot()`; `DesktopEnv.vnc_target` says where it listens, `ensure_vnc()` restarts it.
- `tokens.mint_token(redis, session_id, user_id, target, read_only, ttl_s)`: called by the service
  layer after its permission check; `tokens.revoke_tokens(redis, session_id)` when the lease ends.
- `proxy`: one process per env host (x11vnc listens on localhost only):
  `python -m workers.envs.vnc.proxy --listen 0.0.0.0:6080 --redis-url redis://...`; noVNC connects to
  `ws://HOST:6080/websockify?token=T`. Read-only tokens have their input dropped by `rfb`.
- `takeover`: input forwarded for read-write tokens, published per session and folded into actions.
"""
