"""Database backends of our own (see `postgresql`)."""
