"""The composition root: what joins the apps into one site — the root URLconf, the websocket routes,
the ASGI and WSGI entry points. It may import every app (it sits above rl_control in the import
layers, [tool.importlinter] in pyproject.toml); no app imports it. Settings stay in webapp.settings."""
