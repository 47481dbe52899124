"""Model definitions and reference-data helpers for scripts/export_models.py."""
