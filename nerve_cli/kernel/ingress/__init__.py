"""What brings events in from outside the instance: `webhooks` (HTTP posts to channels, served with uvicorn
only when webhooks are on) and `files` (file reflexes: changed paths as events, watched with watchfiles)."""
