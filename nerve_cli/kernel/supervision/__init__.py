"""Sense worker supervision: `supervisor` (a group's worker and its computes), `process` (one child and its
pipes), `penalty` (back-off and quarantine, pure), `guards` (what may run), `watchdog` (limits on
workers), `crash_site` (whose code a crashed worker was running)."""
