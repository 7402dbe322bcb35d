"""desired -> refresh -> diff -> plan; plan files and rendering."""
