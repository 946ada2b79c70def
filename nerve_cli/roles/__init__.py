"""Ready-made parts for workflow files: `llm_role` (a model through the `llm` library), the tools a model may
call (`tool`, with approval), and `nerve_tools` (what this instance observed, and emit)."""
