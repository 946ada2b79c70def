"""Sense tables: declare (`@table`), diff and generate migrations, apply them, readable-time views, drift."""
