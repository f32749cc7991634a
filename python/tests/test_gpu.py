"""The Python runtime on a GPU against torch.matmul: layouts, dtypes, epilogues, odd shapes,
padded and misaligned operands, streams and CUDA graphs; and every bad input is a clear Python
exception that leaves `out` untouched. Part of `scripts/gpu.sh run python`."""

import math
import subprocess

import pytest

import deepgemm
from conftest import SPECS, deepgemm_bin

TOL = {"bfloat16": 1e-2, "float16": 5e-3, "float32": 1e-4}


def rel_error(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def rand(torch, shape, dtype, scale=1.0):
    return (torch.randn(shape, device="cuda") * scale).to(dtype)


def check(got, want, dtype):
    assert not got.isnan().any(), "unwritten (NaN) outputs"
    err = rel_error(got, want)
    assert err < TOL[str(dtype).split(".")[-1]], f"relative error {err:.2e}"


@pytest.mark.parametrize("m,n", [(1, 257), (77, 257), (300, 512), (60, 400), (5, 300)])
def test_nt_bf16_matches_torch(torch, bundles, m, n):
    kernel = deepgemm.load(bundles["nt_bf16"])
    A = rand(torch, (m, 136), torch.bfloat16)
    W = rand(torch, (n, 136), torch.bfloat16)  # a weight, [N, K] row-major
    D = kernel(A, W.t())  # out allocated, on torch's current stream
    assert D.shape == (m, n) and D.dtype == torch.bfloat16
    check(D, torch.matmul(A.double(), W.t().double()), torch.bfloat16)


def test_col_row_col_f16(torch, bundles):
    kernel = deepgemm.load(bundles["layouts_f16"])
    A = rand(torch, (100, 200), torch.float16).t()  # [200, 100] column-major
    B = rand(torch, (100, 300), torch.float16)  # row-major
    out = torch.full((300, 200), float("nan"), device="cuda", dtype=torch.float16).t()
    D = kernel(A, B, out=out)
    assert D is out
    check(D, A.double() @ B.double(), torch.float16)
    # out=None allocates the declared (column-major) layout.
    D2 = kernel(A, B)
    assert D2.stride() == (1, 200)
    check(D2, A.double() @ B.double(), torch.float16)


def test_bias_gelu_epilogue(torch, bundles):
    kernel = deepgemm.load(bundles["bias_gelu"])
    A, W = rand(torch, (130, 256), torch.bfloat16), rand(torch, (384, 256), torch.bfloat16)
    bias = rand(torch, (384,), torch.bfloat16)
    for alpha in (0.5, 2.0):
        D = kernel(A, W.t(), bias=bias, alpha=alpha) if alpha != 0.5 else kernel(A, W.t(), bias=bias)
        z = alpha * (A.double() @ W.t().double()) + bias.double()
        want = 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
        check(D, want, torch.bfloat16)


def test_alpha_beta_c_f32_output(torch, bundles):
    kernel = deepgemm.load(bundles["alpha_beta_c"])
    A, W = rand(torch, (100, 300), torch.float16), rand(torch, (200, 300), torch.float16)
    C = rand(torch, (100, 200), torch.float32)
    D = kernel(A, W.t(), C=C, alpha=0.25, beta=2.0)
    check(D, 0.25 * (A.double() @ W.t().double()) + 2.0 * C.double(), torch.float16)


def test_f32(torch, bundles):
    kernel = deepgemm.load(bundles["gemm_f32"])
    A, B = rand(torch, (64, 80), torch.float32), rand(torch, (80, 96), torch.float32)
    check(kernel(A, B), A.double() @ B.double(), torch.float32)


def test_padded_and_misaligned_operands(torch, bundles):
    kernel = deepgemm.load(bundles["nt_bf16"])
    big_a = rand(torch, (77, 200), torch.bfloat16)
    A = big_a[:, 3:139]  # ld 200, base 6 bytes in: repacked by the runtime
    W = rand(torch, (257, 137), torch.bfloat16)[:, 1:]  # ld 137, 2 bytes in
    flat = torch.full((77 * 258 + 1,), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = flat[1:].view(77, 258)[:, :257]  # ld 258, misaligned for 16-byte stores
    kernel(A, W.t(), out=out)
    check(out, A.double() @ W.t().double(), torch.bfloat16)
    # The padding around `out` is untouched.
    assert flat[0].isnan() and flat[1:].view(77, 258)[:, 257].isnan().all()


class OnlyDlpack:
    """A CUDA array of another library: it offers DLPack and nothing torch-specific, so the
    runtime reads it through the capsule (torch tensors take the attribute path)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_dlpack_objects_of_other_libraries(torch, bundles):
    kernel = deepgemm.load(bundles["nt_bf16"])
    A, W = rand(torch, (77, 136), torch.bfloat16), rand(torch, (257, 136), torch.bfloat16)
    out = torch.full((77, 257), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert kernel(OnlyDlpack(A), OnlyDlpack(W.t()), out=OnlyDlpack(out)).tensor is out
    check(out, A.double() @ W.t().double(), torch.bfloat16)
    # The same checks hold on that path: a wrong dtype, a CPU array.
    with pytest.raises(TypeError, match="is f16; the kernel takes bf16"):
        kernel(OnlyDlpack(A.half()), W.t(), out=out)
    with pytest.raises(ValueError, match="on the CPU"):
        kernel(OnlyDlpack(A.cpu()), W.t(), out=out)
    # A torch dtype DeepGEMM has no name for is named as torch names it.
    with pytest.raises(TypeError, match="has dtype torch.float64"):
        kernel(A.double(), W.t(), out=out)
    # A lazily negated view would be read un-negated: refused, as DLPack refuses it.
    with pytest.raises(ValueError, match="negative bit"):
        kernel(torch._neg_view(A), W.t(), out=out)


def test_side_stream_and_graph_capture(torch, bundles):
    kernel = deepgemm.load(bundles["nt_bf16"])
    A, W = rand(torch, (300, 136), torch.bfloat16), rand(torch, (512, 136), torch.bfloat16)
    want = A.double() @ W.t().double()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        D = kernel(A, W.t())
    side.synchronize()
    check(D, want, torch.bfloat16)
    # Warm up (sizes the pools) outside the capture, then capture and replay.
    out = torch.empty((300, 512), device="cuda", dtype=torch.bfloat16)
    kernel(A, W.t(), out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel(A, W.t(), out=out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check(out, want, torch.bfloat16)


def test_compile_in_process(torch):
    kernel = deepgemm.compile(SPECS / "gemm_f32.dgml")
    A, B = rand(torch, (64, 80), torch.float32), rand(torch, (80, 96), torch.float32)
    check(kernel(A, B), A.double() @ B.double(), torch.float32)


def test_bad_inputs_raise_and_write_nothing(torch, bundles):
    kernel = deepgemm.load(bundles["nt_bf16"])
    A, W = rand(torch, (77, 136), torch.bfloat16), rand(torch, (257, 136), torch.bfloat16)
    out = torch.full((77, 257), float("nan"), device="cuda", dtype=torch.bfloat16)

    def raises(exc, needle, *args, **kwargs):
        with pytest.raises(exc) as info:
            kernel(*args, **kwargs)
        assert needle in str(info.value), str(info.value)

    raises(ValueError, "on the CPU", A.cpu(), W.t(), out=out)
    raises(TypeError, "is f16; the kernel takes bf16", A.half(), W.t(), out=out)
    raises(ValueError, "must be column-major", A, W.t().contiguous(), out=out)
    tall = rand(torch, (301, 136), torch.bfloat16)  # M = 301: past the declared 1..=300
    raises(ValueError, "outside the bundle's declared range", tall, W.t())
    raises(ValueError, "their K differ", A[:, :100], W.t(), out=out)
    raises(ValueError, "the product is 77x257", A, W.t(), out=out[:, :200])
    raises(TypeError, "unexpected keyword `bias`", A, W.t(), out=out, bias=out)
    raises(TypeError, "expected a CUDA tensor", [[1.0]], W.t(), out=out)
    torch.cuda.synchronize()
    assert out.isnan().all(), "a refused call wrote to out"


def test_bundle_for_another_arch_is_refused(torch, tmp_path):
    subprocess.run([deepgemm_bin(), "compile", str(SPECS / "other_arch.dgml"), "-o", str(tmp_path)], check=True)
    with pytest.raises(deepgemm.DeepGemmError) as info:
        deepgemm.load(tmp_path / "other_arch.dgb")
    text = str(info.value)
    assert "sm_80" in text and "sm_90a" in text, text


def test_not_a_bundle(torch, tmp_path):
    junk = tmp_path / "junk.dgb"
    junk.write_bytes(b"not a bundle")
    with pytest.raises(deepgemm.DeepGemmError, match="not a valid DeepGEMM bundle"):
        deepgemm.load(junk)
