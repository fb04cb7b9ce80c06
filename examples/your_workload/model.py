"""An example model function for batchscale (docs/your-workload.md).

batchscale calls ``build(params)`` once per trial. ``params`` holds your model's own
parameters (here ``units``, fixed or searched in the study spec) plus ``input_shape``
and ``num_classes``. Return an uncompiled Keras model whose outputs are logits:
batchscale adds the loss, the optimizer and the metrics.
"""

import keras


def build(params):
    units = int(params.get("units", 128))
    return keras.Sequential([
        keras.Input(shape=params["input_shape"]),
        keras.layers.Flatten(),
        keras.layers.Dense(units, activation="relu"),
        keras.layers.Dense(units, activation="relu"),
        keras.layers.Dense(params["num_classes"]),  # logits: no softmax
    ])
