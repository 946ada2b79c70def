"""The engine process. `engine.Engine` builds the parts of the rooms below into one exit stack and runs them:

- `loop/`: the running loop: outcomes, the signal bus (router), the pump, the log writer, the built-in
  senses, the optional edges, and the desk the edges see;
- `control/`: what the engine answers: the control socket server, its typed requests, the snapshot
  they read, the metrics endpoint, the built-in nerve-health sense;
- `reload/`: file watching and hot reload of nerve.yaml, senses and workflows;
- `ingress/`: events from outside: the webhook server, file reflexes;
- `workflows/`: the workflow manager (admission, a worker's life, recovery, gates, the journal);
- `supervision/`: the process manager (groups), sense worker supervisors and their processes,
  penalties and quarantine, guards, the watchdog, crash sites;
- `core/`: the pure reflex rules (scheduler, cron), emits, delivery, the ledger of owed log rows,
  counters, the console report, the daily archive job.
Rooms import only the rooms listed below them; none imports the engine.
"""
