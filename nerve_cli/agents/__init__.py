"""Agents where they run: the delivery adapters over the inbox (`store.inbox`), and the harnesses' setup.

- `watch`: waiting for an agent's news (its sources' and its inbox's commits), blocking or on an event loop;
- `text`: a delivery as the text a model reads (a hook's stderr);
- `codex`: Nerve as a second client of the user's `codex app-server`;
- `install`: the harnesses' own configuration (Claude Code, OpenCode, Codex), merged, never clobbered.

The inbox and its guarantees are one part (store.inbox); each adapter here is thin.
"""
