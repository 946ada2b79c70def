"""The pure workflow automaton: what a thread is and how it steps, with no I/O and no processes.

`model` (roles, messages, results, the definition), `thread` (one thread's
steps from its chain of messages), `directive` (what a sense's compute asks of
workflows), `context`, `load` (import a workflow file). The workflow worker
(`worker/thread_host.py`) runs it; the kernel's workflow manager
(`kernel/workflows/`) records and schedules it.
"""
