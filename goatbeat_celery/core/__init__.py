"""The scheduling core: standard library only (a test enforces it)."""
