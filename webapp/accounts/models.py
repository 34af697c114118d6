"""Roles are Django groups (see `roles.py`); accounts has no tables of its own."""
