"""Sense operations behind `nerve sense …`: scaffold, one-off compute in a worker, list/show data."""
