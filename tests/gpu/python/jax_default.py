"""A small JAX program with JAX's default settings: XLA preallocates most of
the GPU's memory as one pool, so every launch can reach tens of GiB. A jitted
MLP step (cuBLAS matmuls, fused elementwise and reductions) run a few times,
its outputs printed as hashes of their exact bytes (identical with and
without the shim).
"""
import hashlib

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


def main():
    assert jax.devices()[0].platform == "gpu", jax.devices()
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    w1 = jax.random.normal(k1, (512, 1024), jnp.float32) * 0.02
    w2 = jax.random.normal(k2, (1024, 256), jnp.float32) * 0.02
    x = jax.random.normal(k3, (128, 512), jnp.float32)
    for i in range(5):
        y, loss = step(w1, w2, x)
        x = x + 0.01 * jnp.mean(y)
    y.block_until_ready()
    result("y", y)
    result("loss", loss)
    # XLA names its kernels after the fusions; cuBLAS's are gemm-like.
    print("made at-least fusion|gemm|nvjet|cutlass|xmma 5")


if __name__ == "__main__":
    main()
