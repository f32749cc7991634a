"""Host overhead per call of a DeepGEMM kernel from Python, beside torch.matmul's own.

    python3 python/bench_overhead.py BUNDLE.dgb [--calls 200] [--rounds 20]

The bundle is examples/c/gemm.dgml's (`linear`, M = 64 here, N = 256, K = 384: a kernel of a
few microseconds). Each round times `calls` back-to-back calls from the first call to the
return of the last (each returns once its kernel is enqueued), then synchronizes; the best
round's time per call is reported (the least disturbed by the OS), with the median. Prints one
JSON line per case.

Such a kernel runs about as long on the GPU as a call takes on the host, so a round that only
called would time whichever is slower. Each round therefore starts with `torch.cuda._sleep`,
which holds the GPU for longer than the round takes: the launches queue behind it and only
the host's time is measured.
"""

import argparse
import json
import statistics
import time

import torch

import deepgemm


def measure(fn, calls, rounds):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        torch.cuda._sleep(calls * 100_000)  # ~50 us of GPU cycles per call
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return min(per_call), statistics.median(per_call)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    kernel = deepgemm.load(args.bundle)["linear"]
    A = torch.randn(64, 384, device="cuda").bfloat16()
    W = torch.randn(256, 384, device="cuda").bfloat16()
    bias = torch.randn(256, device="cuda").bfloat16()
    out = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    Wt = W.t()
    cases = {
        "deepgemm kernel(A, W.t(), out=D, bias=b)": lambda: kernel(A, Wt, out=out, bias=bias),
        "deepgemm kernel(A, W.t(), bias=b) (allocates D)": lambda: kernel(A, Wt, bias=bias),
        "torch.matmul(A, W.t(), out=D)": lambda: torch.matmul(A, Wt, out=out),
        "torch.addmm(b, A, W.t(), out=D)": lambda: torch.addmm(bias, A, Wt, out=out),
        # The parts a call pays in Python before the launch, for the breakdown.
        "part: 4x tensor.__dlpack__()": lambda: (
            A.__dlpack__(), Wt.__dlpack__(), out.__dlpack__(), bias.__dlpack__()
        ),
        "part: 4x (data_ptr, shape, stride, dtype, device)": lambda: [
            (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) for t in (A, Wt, out, bias)
        ],
        "part: torch._C._cuda_getCurrentRawStream(0)": lambda: torch._C._cuda_getCurrentRawStream(0),
    }
    for name, fn in cases.items():
        best, median = measure(fn, args.calls, args.rounds)
        print(json.dumps({"case": name, "best_us": round(best, 2), "median_us": round(median, 2)}))


if __name__ == "__main__":
    main()
