"""Training recipes, the launcher and the signals they measure."""
