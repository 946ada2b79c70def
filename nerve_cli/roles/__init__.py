"""Ready-made roles for workflow files: `llm_role` (a model through the `llm` library)."""
