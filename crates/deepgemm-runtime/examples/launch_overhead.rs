//! Host overhead of `Kernel::launch`, from call to enqueue, with tensor maps cached and the
//! scratch pool warm (a benchmark for the GPU machine: `scripts/gpu.sh run overhead`).
//!
//!     launch_overhead BUNDLE.dgb [CALLS] [ROUNDS]
//!
//! The bundle is examples/c/gemm.dgml's (`linear`: bf16, bias, alpha; M = 64, N = 256,
//! K = 384). Each round times CALLS back-to-back launches, then synchronizes; prints the best
//! and median round's time per call, and the same for operands 2 bytes off (repacked).
//!
//! A kernel this small runs about as long on the GPU as its launch takes on the host, so a
//! round that only launched would time whichever of the two is slower. Each round therefore
//! starts with a kernel that spins on the GPU for longer than the round takes: the launches
//! queue behind it, and the host's time is all that is timed. `with_sync_us` is the round with
//! its final synchronize (spin included), for comparison.
//!
//! Beside it, the parts of that time: `bind` alone (the operand checks, no GPU call), `prepare`
//! (checks and planning), the enqueue of a launch prepared once, and the driver's own floor:
//! `cuLaunchKernelEx` of an empty kernel with as many parameters, which no runtime can go below.

use cudarc::driver::sys;
use deepgemm_runtime::{Operand, RawStream, Runtime, Shape};
use std::ffi::c_void;
use std::time::Instant;

/// Best and median of per-call times, in microseconds.
fn summary(mut per_call: Vec<f64>) -> (f64, f64) {
    per_call.sort_by(f64::total_cmp);
    (per_call[0], per_call[per_call.len() / 2])
}

/// Driver-compiled helper kernels (PTX): `empty` with `PARAMS` 8-byte parameters, and `spin`,
/// which holds one block busy for its parameter's nanoseconds.
struct HelperKernels {
    module: sys::CUmodule,
    empty: sys::CUfunction,
    spin: sys::CUfunction,
}

const PARAMS: usize = 12;

impl HelperKernels {
    fn load() -> Result<HelperKernels, Box<dyn std::error::Error>> {
        let params: Vec<String> = (0..PARAMS).map(|i| format!(".param .u64 p{i}")).collect();
        let ptx = format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n\
             .visible .entry empty({}) {{ ret; }}\n\
             .visible .entry spin(.param .u64 ns) {{\n\
             .reg .u64 t0, t, d, lim; .reg .pred p;\n\
             ld.param.u64 lim, [ns]; mov.u64 t0, %globaltimer;\n\
             again: mov.u64 t, %globaltimer; sub.u64 d, t, t0; setp.lt.u64 p, d, lim; @p bra again;\n\
             ret; }}\n\0",
            params.join(", ")
        );
        let mut helpers = HelperKernels {
            module: std::ptr::null_mut(),
            empty: std::ptr::null_mut(),
            spin: std::ptr::null_mut(),
        };
        // SAFETY: the PTX is NUL-terminated text; the out-pointers are valid; the context is
        // current (Runtime::new made it so on this thread).
        unsafe {
            sys::cuModuleLoadData(&mut helpers.module, ptx.as_ptr() as *const c_void).result()?;
            sys::cuModuleGetFunction(&mut helpers.empty, helpers.module, c"empty".as_ptr())
                .result()?;
            sys::cuModuleGetFunction(&mut helpers.spin, helpers.module, c"spin".as_ptr())
                .result()?;
        }
        Ok(helpers)
    }

    /// Occupies the legacy default stream for `us` microseconds.
    fn spin(&self, us: f64) -> Result<(), Box<dyn std::error::Error>> {
        let mut ns = (us * 1e3) as u64;
        let mut params = [&mut ns as *mut u64 as *mut c_void];
        // SAFETY: the function is live; its one parameter is the u64 above, alive for the call.
        unsafe {
            sys::cuLaunchKernel(
                self.spin,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        Ok(())
    }
}

impl Drop for HelperKernels {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`; nothing uses it any more.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// Times `rounds` rounds of `calls` calls of `f`, each round queued behind a spin of the GPU
/// long enough to outlast it; per round, the host's time per call and the time per call
/// including the synchronize that ends the round.
fn time_rounds(
    helpers: &HelperKernels,
    calls: usize,
    rounds: usize,
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
    mut sync: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(Vec<f64>, Vec<f64>), Box<dyn std::error::Error>> {
    for _ in 0..50 {
        f()?;
    }
    sync()?;
    let (mut host, mut with_sync) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        helpers.spin(calls as f64 * 40.0)?;
        let start = Instant::now();
        for _ in 0..calls {
            f()?;
        }
        host.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
        sync()?;
        with_sync.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    Ok((host, with_sync))
}

/// The driver's floor: `cuLaunchKernelEx` of an empty kernel with `PARAMS` parameters.
/// With `vary`, one parameter's value changes on every call (as a launch on other buffers does).
fn driver_floor(
    helpers: &HelperKernels,
    calls: usize,
    rounds: usize,
    vary: bool,
) -> Result<(f64, f64, f64), Box<dyn std::error::Error>> {
    let mut values = [0u64; PARAMS];
    let config = sys::CUlaunchConfig {
        gridDimX: 16,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 128,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: std::ptr::null_mut(),
        attrs: std::ptr::null_mut(),
        numAttrs: 0,
    };
    let (host, with_sync) = time_rounds(
        helpers,
        calls,
        rounds,
        || {
            if vary {
                values[0] ^= 256;
            }
            let mut params: [*mut c_void; PARAMS] =
                std::array::from_fn(|i| &mut values[i] as *mut u64 as *mut c_void);
            // SAFETY: the function is live; params point at PARAMS u64 values that outlive the call.
            unsafe {
                sys::cuLaunchKernelEx(
                    &config,
                    helpers.empty,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
            .result()?;
            Ok(())
        },
        // SAFETY: the legacy default stream of the current context.
        || Ok(unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) }.result()?),
    )?;
    let (best, median) = summary(host);
    Ok((best, median, summary(with_sync).0))
}

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
    let helpers = HelperKernels::load()?;
    let (m, n, k) = (64u64, 256u64, 384u64);
    let a = gpu.alloc((m * k * 2) as usize + 64)?;
    let b = gpu.alloc((n * k * 2) as usize + 64)?;
    let bias = gpu.alloc((n * 2) as usize + 64)?;
    let d = gpu.alloc((m * n * 2) as usize + 64)?;
    let other_d = gpu.alloc((m * n * 2) as usize + 64)?;
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
        let shape = Shape::new(m, n, k);
        let sync = || -> Result<(), Box<dyn std::error::Error>> {
            Ok(gpu.on_stream(stream).synchronize()?)
        };
        // One launch sizes the pool and encodes the maps: none may happen while timed.
        kernel.launch(shape, &ops, &params, stream)?;
        sync()?;
        let (encodes, allocations) = kernel.pool_counters(shape)?;
        let (host, with_sync) = time_rounds(
            &helpers,
            calls,
            rounds,
            || Ok(kernel.launch(shape, &ops, &params, stream)?),
            sync,
        )?;
        let after = kernel.pool_counters(shape)?;
        let (best, median) = summary(host);
        println!(
            "{{\"case\": \"rust Kernel::launch, {label}\", \"best_us\": {best:.2}, \
             \"median_us\": {median:.2}, \"with_sync_us\": {:.2}, \
             \"tensor_map_encodes_while_timed\": {}, \"allocations_while_timed\": {}}}",
            summary(with_sync).0,
            after.0 - encodes,
            after.1 - allocations
        );
        if offset == 0 {
            // The parts: the checks alone; checks and planning (`prepare`); and the enqueue of a
            // launch planned once, which is the driver's launch plus a lock.
            let bind = time_rounds(
                &helpers,
                calls,
                rounds,
                || {
                    std::hint::black_box(kernel.bind(shape, &ops, &params)?);
                    Ok(())
                },
                || Ok(()),
            )?;
            let plan = time_rounds(
                &helpers,
                calls,
                rounds,
                || {
                    std::hint::black_box(kernel.prepare(shape, &ops, &params, stream)?);
                    Ok(())
                },
                || Ok(()),
            )?;
            // A launch that repeats the last one's arguments reuses its plan; alternating D
            // between two buffers makes every launch check and plan again.
            let mut other_ops = ops;
            other_ops[3].ptr = other_d.ptr();
            let mut turn = false;
            let alternating = time_rounds(
                &helpers,
                calls,
                rounds,
                || {
                    turn = !turn;
                    let ops = if turn { &other_ops } else { &ops };
                    Ok(kernel.launch(shape, ops, &params, stream)?)
                },
                sync,
            )?;
            let prepared = kernel.prepare(shape, &ops, &params, stream)?;
            let enqueue = time_rounds(&helpers, calls, rounds, || Ok(prepared.enqueue()?), sync)?;
            for (part, (host, _)) in [
                (
                    "Kernel::launch, aligned, D alternating between two buffers (planned every call)",
                    alternating,
                ),
                ("Kernel::bind alone (checks, no GPU call)", bind),
                (
                    "Kernel::prepare alone (checks and planning, no GPU call)",
                    plan,
                ),
                ("PreparedLaunch::enqueue (planned once)", enqueue),
            ] {
                let (best, median) = summary(host);
                println!(
                    "{{\"case\": \"rust {part}\", \"best_us\": {best:.2}, \"median_us\": {median:.2}}}"
                );
            }
        }
    }
    for (vary, label) in [(false, ""), (true, ", one changing every call")] {
        let (best, median, with_sync) = driver_floor(&helpers, calls, rounds, vary)?;
        println!(
            "{{\"case\": \"driver floor: cuLaunchKernelEx of an empty kernel, {PARAMS} params{label}\", \
             \"best_us\": {best:.2}, \"median_us\": {median:.2}, \"with_sync_us\": {with_sync:.2}}}"
        );
    }
    Ok(())
}
