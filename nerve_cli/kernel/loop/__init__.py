"""The running loop, as parts whose calls run one way: outcomes → routing → pump.

- `outcomes`: the supervisors' hooks and the end of each compute; `Outcomes.pump()` is the loop's
  entry point (a timer, a trigger, an emit, a request all come through it);
- `router`: the signal bus: a committed signal or event fanned out to the parts that hear it, then to
  each `Subscriber` (where a new edge plugs in);
- `pump`: the one timer and the hand-over of due starts (a start it cannot place is returned, a `Miss`);
- `builtins`: nerve-health and nerve-threads, answering like a worker's group;
- `records` (one record per compute), `logwriter` (batched commits), `freshness` (expect_signal_every),
  `current` (the config in force);
- `edges`: traces, the fleet, webhooks, file reflexes, metrics, started only when asked;
- `desk`: the running engine as control requests, hot reload, metrics and webhooks see it.

The engine (`kernel.engine`) builds them in order into one exit stack; none imports it.
"""
