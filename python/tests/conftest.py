"""The GPU suite's fixtures: torch on a CUDA GPU (required: the suite never passes without one)
and the suite's specs compiled into bundles by the `deepgemm` command ($DEEPGEMM_BIN)."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPECS = pathlib.Path(__file__).resolve().parent / "specs"


@pytest.fixture(scope="session")
def torch():
    import torch

    assert torch.cuda.is_available(), "the GPU suite needs a CUDA GPU"
    return torch


def deepgemm_bin():
    return os.environ.get("DEEPGEMM_BIN", str(ROOT / "target" / "release" / "deepgemm"))


@pytest.fixture(scope="session")
def bundles(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundles")
    made = {}
    for spec in sorted(SPECS.glob("*.dgml")):
        subprocess.run([deepgemm_bin(), "compile", str(spec), "-o", str(out)], check=True)
        made[spec.stem] = out / f"{spec.stem}.dgb"
    return made
