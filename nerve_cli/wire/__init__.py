"""The contract between the kernel and its workers, below both: typed messages, ErrorInfo, the group spec.

The kernel and the worker each import this package and never each other.
"""
