"""The engine's open-file limit, raised to what the system allows before any worker starts.

Every sense of a group keeps its database open in the group's worker (the file, its -wal and -shm), and each
compute thread waits in an epoll of its own (`worker.stdio.Inbox`): a group of a few hundred senses needs more
than the 1,024 files many shells and service managers allow by default, and fails on the next open with
"too many open files". The soft limit is raised to the hard one (at most `CEILING`), as a process that needs
many files is expected to do itself; the workers inherit it. Nothing is raised past what the hard limit allows,
and nothing is lowered.
"""

from __future__ import annotations

import resource

CEILING = 1 << 20  # a hard limit of "unlimited" is not taken literally


def raise_open_file_limit() -> tuple[int, int] | None:
    """(soft before, soft now) when the soft limit was raised; None when it was high enough or cannot move."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return soft, target
    except (OSError, ValueError):  # a platform or sandbox that refuses: the limit stays as it was
        return None
    return None
