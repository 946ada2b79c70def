"""The engine process. `engine.Engine` runs the loop and owns one part of each room below:

- `control/`: what the engine answers: the control socket server, its requests, the metrics
  endpoint, the built-in nerve-health sense;
- `reload/`: file watching and hot reload of nerve.yaml, senses and workflows;
- `ingress/`: events from outside: the webhook server, file reflexes;
- `workflows/`: the workflow manager (admission, a worker's life, recovery, gates, the journal);
- `supervision/`: sense worker groups and their processes, penalties and quarantine, guards,
  the watchdog, crash sites;
- `core/`: the pure reflex rules (scheduler, cron), emits, delivery, the ledger of owed log rows,
  counters, the console report, the daily archive job.
Rooms import only the rooms listed below them; none imports the engine.
"""
