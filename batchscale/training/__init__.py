"""Training one trial: the paper's optimizer and schedules, metrics, evaluation, Keras set-up."""
