"""Everything on disk the engine and the CLI read and write: logs.db, a thread's rows, sense databases,
events.db and its cursors, the read-only log view, blobs, the archive, history and the feed, quarantines,
the instance lock (one engine per instance), and `sqlitefile`, the one way a database is opened."""
