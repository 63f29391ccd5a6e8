"""A small JAX program with JAX's default settings: XLA preallocates most of
the GPU's memory as one pool, so every launch can reach tens of GiB. A jitted
MLP step (cuBLAS matmuls, fused elementwise and reductions) run a few times,
its outputs printed as hashes of their exact bytes (identical with and
without the shim).

With --autotuned (XLA's autotuner left on, which picks among algorithms by
timing them, so that two plain runs may differ in the last bits) the
outputs are instead held to a float64 NumPy reference of the same steps,
and what is printed is whether they agree within a tolerance far above
any algorithm's rounding and far below a wrong result.
"""
import hashlib
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np


def result(name, array):
    data = np.asarray(array).tobytes()
    print(f"result {name} {array.dtype} {'x'.join(map(str, array.shape))} sha256 {hashlib.sha256(data).hexdigest()}")


@jax.jit
def step(w1, w2, x):
    h = jax.nn.gelu(x @ w1)
    y = jax.nn.softmax(h @ w2, axis=-1)
    loss = -jnp.mean(jnp.log(y[:, 0] + 1e-6))
    return y, loss


def reference(w1, w2, x, steps):
    """The same steps in float64 NumPy (jax.nn.gelu is the tanh form)."""
    w1, w2, x = (np.asarray(a, np.float64) for a in (w1, w2, x))
    for _ in range(steps):
        v = x @ w1
        h = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
        z = h @ w2
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
        loss = -np.mean(np.log(y[:, 0] + 1e-6))
        x = x + 0.01 * np.mean(y)
    return y, loss


def main():
    assert jax.devices()[0].platform == "gpu", jax.devices()
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    w1 = jax.random.normal(k1, (512, 1024), jnp.float32) * 0.02
    w2 = jax.random.normal(k2, (1024, 256), jnp.float32) * 0.02
    x = jax.random.normal(k3, (128, 512), jnp.float32)
    x0 = x
    for i in range(5):
        y, loss = step(w1, w2, x)
        x = x + 0.01 * jnp.mean(y)
    y.block_until_ready()
    if "--autotuned" in sys.argv:
        want_y, want_loss = reference(w1, w2, x0, 5)
        print(f"result y within tolerance of the float64 reference: "
              f"{np.allclose(np.asarray(y, np.float64), want_y, rtol=2e-2, atol=1e-4)}")
        print(f"result loss within tolerance of the float64 reference: "
              f"{math.isclose(float(loss), float(want_loss), rel_tol=1e-2)}")
    else:
        result("y", y)
        result("loss", loss)
    # XLA names its kernels after the fusions; cuBLAS's are gemm-like.
    print("made at-least fusion|gemm|nvjet|cutlass|xmma 5")


if __name__ == "__main__":
    main()
