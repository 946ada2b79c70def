"""The {{name}} switch keeps no tables of its own: what it passes on is its signal."""
