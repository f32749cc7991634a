"""DeepGEMM from Python: load a compiled kernel bundle and call it on CUDA tensors.

    import torch, deepgemm
    gemm = deepgemm.load("out/gemm_bf16.dgb")          # or deepgemm.compile("gemm.dgml")
    D = gemm(A, W.t())                                 # D = A @ W.T on torch's current stream
    gemm(A, W.t(), out=D, bias=b, alpha=0.5)           # operands and params by their spec names

torch tensors are read through their attributes, any other CUDA array through DLPack (so any
CUDA array library works; torch is needed only to allocate `out` when it is omitted). See
docs/runtime.md ("Python").
"""

import os as _os
import sys as _sys


def _find_nvrtc():
    """Points the runtime at NVRTC from a pip install in this environment (nvidia-cuda-nvrtc),
    for deepgemm.compile; loading bundles needs no NVRTC."""
    if _os.environ.get("DEEPGEMM_NVRTC_DIR"):
        return
    for entry in _sys.path:
        lib = _os.path.join(entry, "nvidia", "cu13", "lib")
        if _os.path.exists(_os.path.join(lib, "libnvrtc.so.13")):
            _os.environ["DEEPGEMM_NVRTC_DIR"] = lib
            return


_find_nvrtc()

from ._native import Bundle, DeepGemmError, Kernel  # noqa: E402
from ._native import compile as _compile  # noqa: E402
from ._native import load as _load  # noqa: E402

__all__ = ["load", "compile", "Bundle", "Kernel", "DeepGemmError"]


def _device(device):
    if device is not None:
        return int(getattr(device, "index", device) or 0)
    torch = _sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    return 0


def load(path, device=None):
    """Loads the bundle (`deepgemm compile` writes DIR/NAME.dgb) on `device` (default: torch's
    current CUDA device, else 0). Raises DeepGemmError for a file that is not a bundle or one
    built for another GPU architecture."""
    return _load(_os.fspath(path), _device(device))


def compile(path, device=None):  # noqa: A001 - the verb of the product
    """Compiles the kernels of a .dgml file in-process (NVRTC; compiled cubins are cached on
    disk) and loads them like `load`."""
    return _compile(_os.fspath(path), _device(device))
