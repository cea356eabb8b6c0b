"""A module whose import fails (the server command reports it in one line)."""
raise RuntimeError("this module is broken on purpose")
