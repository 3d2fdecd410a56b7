"""Whether a JSON document can be stored: its nesting depth and its text."""
