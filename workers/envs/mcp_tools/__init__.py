"""MCP tools for agents (seed 004): a local stdio server (files + calculator) and a client wrapper."""
