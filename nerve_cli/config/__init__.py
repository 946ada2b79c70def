"""nerve.yaml: its model (pydantic), load and validate, comment-keeping edits, `config check`, lifecycle, mesh."""
