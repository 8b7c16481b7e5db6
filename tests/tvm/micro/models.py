"""Models small enough to build and emulate in about a second per strategy."""

TINY_CNN = ("zoo:small_cnn", {"channels": 4, "resolution": 8, "depth": 2})
#: The int8 VGG-style CNN of the zoo, shrunk the same way.
TINY_INT8 = ("zoo:int8_vgg", {"resolution": 8, "channels": [4, 8]})
