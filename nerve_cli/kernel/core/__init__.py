"""The loop core's parts: the pure reflex rules (`scheduler`, `cron`), `emits` (durable, group commit),
`delivery` (when a listener runs again), `ledger` (log rows a killed kernel owed), `stats`, `report`
(the console), `archive_job` (the daily archive)."""
