"""What the engine answers: `server` (the control socket), `requests` (one handler per op), `metrics`
(the `--metrics` endpoint), `health` (the built-in nerve-health sense)."""
