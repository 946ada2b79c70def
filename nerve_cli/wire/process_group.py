"""A worker leads its own process group, and what its user code starts dies with it.

Both ends spawn workers (the kernel's supervisor, `nerve sense compute`'s
standalone client) and both clean up the same way once the worker is gone.
"""

from __future__ import annotations

import os
import signal


def kill_group(pid: int | None) -> None:
    """SIGKILL what is left of a dead worker's process group: the processes its user code started.

    A worker leads its own group (`start_new_session`), and its children stay in it
    unless they start their own session; without this they outlived every stop and
    respawn. The group's id stays reserved while any member lives, so this can only
    reach the worker's own leftovers.
    """
    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left (the usual case)
