"""Model families. Each is an `AbstractModel`: static hyper-parameters, `init(key)` and
`__call__(params, x)`; parameters are a separate pytree integrated by `flows.simulate`."""

from .base import AbstractModel as AbstractModel
from .deep import DEEP_ACTIVATIONS as DEEP_ACTIVATIONS
from .deep import DeepFCN as DeepFCN
from .function import FunctionModel as FunctionModel
from .homogeneous import Homogeneous as Homogeneous
from .leaky import LeakyReLUNet as LeakyReLUNet
from .two_layer import ACTIVATIONS as ACTIVATIONS
from .two_layer import TwoLayer as TwoLayer

__all__ = [
    "AbstractModel",
    "TwoLayer",
    "ACTIVATIONS",
    "Homogeneous",
    "DeepFCN",
    "DEEP_ACTIVATIONS",
    "LeakyReLUNet",
    "FunctionModel",
]
