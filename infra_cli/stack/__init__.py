"""Stack files: YAML with source positions, ${VAR} interpolation, and the stack model."""
