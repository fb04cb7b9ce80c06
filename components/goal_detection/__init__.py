"""Goal detection: the first evaluated step at which a trial beats each goal."""
