"""The built-in networks: small real architectures written with TVM's ``relax.frontend.nn``,
each with random weights, named ``zoo:NAME`` in a model source
(:func:`planner.tvm.sources.build_network`)."""

from __future__ import annotations

from collections.abc import Callable

from planner.tvm.network import Network
from planner.tvm.zoo import (
    cnn,
    densenet,
    int8_cnn,
    mlp,
    mobilenet,
    pool_reuse,
    randwire,
    resnet,
    transformer,
    unet,
)

ZOO: dict[str, Callable[..., Network]] = {
    "small_cnn": cnn.small_cnn,
    "residual_cnn": cnn.residual_cnn,
    "resnet18": resnet.resnet18,
    "mobilenet_v2": mobilenet.mobilenet_v2,
    "densenet": densenet.densenet,
    "pool_reuse": pool_reuse.pool_reuse,
    "unet": unet.unet,
    "bert_tiny": transformer.bert_tiny,
    "mlp": mlp.mlp,
    "int8_vgg": int8_cnn.int8_vgg,
    "randwire": randwire.randwire,
}

def zoo_names() -> list[str]:
    return sorted(ZOO)
