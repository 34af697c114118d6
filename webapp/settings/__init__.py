"""Settings split by environment: `base` (shared), `dev`, `test`, `prod`. Pick with DJANGO_SETTINGS_MODULE."""
