"""Default container images of the components (placeholders until images are built).

Plain constants: nothing here looks at the environment. Cluster builds replace them
at compile time with the digests skaffold produced.
"""

LIGHT_IMAGE = "batchscale-light:dev"  # CPU-only steps: data prep, search, goals, aggregate
TRAINER_IMAGE = "batchscale-trainer:dev"  # train_trial (Keras with JAX or TensorFlow)
