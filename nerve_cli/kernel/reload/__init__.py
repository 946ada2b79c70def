"""Hot reload: `watch` (which sense, workflow or config changed) and `apply` (apply it to the running engine)."""
