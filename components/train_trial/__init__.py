"""Train one trial: model, optimizer, schedule and the training loop."""
