"""``batchscale plan``: before a sweep, the gradient noise scale, a proposed batch-size grid
and the study's estimated trials, steps, device-hours, wall time and cost (plan.py)."""
