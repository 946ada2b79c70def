"""What the control socket's two ends (the engine's server and the CLI's client) must agree on."""

from __future__ import annotations

# The engine waits for a compute asked on its socket as long as the sense's timeout and grace period
# allow (kernel/control/requests.py), at most COMPUTE_WAIT_MAX; a client waits a little longer, so the
# engine's answer (the outcome, or "did not finish within ...") always arrives before the client gives up.
COMPUTE_WAIT_MAX = 600.0
