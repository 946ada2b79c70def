"""The instance folder as a whole: scaffold, git and one Nerve commit, the attic, service units, deps, backup, datasette."""
