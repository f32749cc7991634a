"""Host overhead per call of a DeepGEMM kernel from Python, beside torch.matmul's own.

    python3 python/bench_overhead.py BUNDLE.dgb [--calls 200] [--rounds 20]

The bundle is examples/c/gemm.dgml's (`linear`, M = 64 here, N = 256, K = 384: a kernel of a
few microseconds, so the GPU keeps up and the host's time per call is what is measured). Each
round times `calls` back-to-back calls from the first call to the return of the last (each
returns once its kernel is enqueued), then synchronizes; the best round's time per call is
reported (the least disturbed by the OS), with the median. Prints one JSON line per case.
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
    }
    for name, fn in cases.items():
        best, median = measure(fn, args.calls, args.rounds)
        print(json.dumps({"case": name, "best_us": round(best, 2), "median_us": round(median, 2)}))


if __name__ == "__main__":
    main()
