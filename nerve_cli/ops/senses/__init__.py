"""Sense operations behind `nerve sense …`: scaffold, one-off compute in a worker, inspect and chart data,
delete (to the attic), rename."""
