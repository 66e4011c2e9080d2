"""Reading events from files."""
