//! Host overhead of `Kernel::launch`, from call to enqueue, with tensor maps cached and the
//! scratch pool warm (a benchmark for the GPU machine: `scripts/gpu.sh run overhead`).
//!
//!     launch_overhead BUNDLE.dgb [CALLS] [ROUNDS]
//!
//! The bundle is examples/c/gemm.dgml's (`linear`: bf16, bias, alpha; M = 64, N = 256,
//! K = 384, a kernel of a few microseconds, so the GPU keeps up with the host). Each round
//! times CALLS back-to-back launches, then synchronizes; prints the best and median round's
//! time per call, and the same for an NT GEMM whose operands are 2 bytes off (repacked).

use deepgemm_runtime::{Operand, RawStream, Runtime, Shape};
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: launch_overhead BUNDLE.dgb [CALLS] [ROUNDS]")?;
    let calls: usize = args.get(2).map_or(Ok(200), |s| s.parse())?;
    let rounds: usize = args.get(3).map_or(Ok(20), |s| s.parse())?;
    let runtime = Runtime::new(0)?;
    let bundle = runtime.load(path)?;
    let kernel = bundle.kernel(Some("linear"))?;
    let gpu = runtime.gpu();
    let (m, n, k) = (64u64, 256u64, 384u64);
    let a = gpu.alloc((m * k * 2) as usize + 64)?;
    let b = gpu.alloc((n * k * 2) as usize + 64)?;
    let bias = gpu.alloc((n * 2) as usize + 64)?;
    let d = gpu.alloc((m * n * 2) as usize + 64)?;
    let stream = RawStream(std::ptr::null_mut());
    for (label, offset) in [("aligned", 0u64), ("2-byte offset (repacked)", 2)] {
        let ops = [
            Operand {
                name: "A",
                ptr: a.ptr() + offset,
                ld: k,
                dtype: None,
            },
            Operand {
                name: "B",
                ptr: b.ptr() + offset,
                ld: k,
                dtype: None,
            },
            Operand {
                name: "bias",
                ptr: bias.ptr() + offset,
                ld: 0,
                dtype: None,
            },
            Operand {
                name: "D",
                ptr: d.ptr() + offset,
                ld: n,
                dtype: None,
            },
        ];
        let params = [("alpha", 1.0)];
        // Boxed error: the closure's Result stays small.
        let launch = || -> Result<(), Box<dyn std::error::Error>> {
            Ok(kernel.launch(Shape::new(m, n, k), &ops, &params, stream)?)
        };
        for _ in 0..50 {
            launch()?;
        }
        gpu.on_stream(stream).synchronize()?;
        let (encodes, allocations) = kernel.pool_counters(Shape::new(m, n, k))?;
        let mut per_call = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let start = Instant::now();
            for _ in 0..calls {
                launch()?;
            }
            per_call.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
            gpu.on_stream(stream).synchronize()?;
        }
        let after = kernel.pool_counters(Shape::new(m, n, k))?;
        per_call.sort_by(f64::total_cmp);
        println!(
            "{{\"case\": \"rust Kernel::launch, {label}\", \"best_us\": {:.2}, \"median_us\": {:.2}, \
             \"tensor_map_encodes_while_timed\": {}, \"allocations_while_timed\": {}}}",
            per_call[0],
            per_call[per_call.len() / 2],
            after.0 - encodes,
            after.1 - allocations
        );
    }
    Ok(())
}
