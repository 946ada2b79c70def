"""`nerve top`: the live dashboard (source: what to show; app: the Textual screens)."""
