//! The epilogue's roundings on a real GPU, at exact ties: `cast<i8>`, `cast<f16>` and
//! `cast<bf16>` of the accumulator, and the f16 and bf16 stores of D. The inputs are chosen so
//! that every accumulator is exact in f32 and lands on a tie (or just off one, or past a
//! saturation limit) of the rounding under test; the kernel's output must then equal the CPU
//! reference's bytes exactly (`Problem::expected_output`), and the reference must give the values
//! listed here. Run on the GPU machine (scripts/gpu.sh); without a GPU every test fails.

mod gpu_support;

use deepgemm::codec::{decode, round_to};
use deepgemm::plan::Backend;
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::DeviceProblem;
use gpu_support::ties::{cases, dgml, entry, tie_problem, TieCase, SHAPE};
use gpu_support::{generate, gpu, parse};

/// Same value, the sign of zero and infinities included.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

/// Runs one case on `backend`; the error says which elements differ.
fn check_case(gpu: &Gpu, case: &TieCase, backend: Backend) -> Result<String, String> {
    // The CPU side first: the rounding gives the listed values, and so does the reference.
    for &(v, want) in &case.ties {
        let got = round_to(case.rounding, v);
        if !same(got, want) {
            return Err(format!(
                "CPU: {} of {v} is {got}, not {want}",
                case.rounding
            ));
        }
    }
    let spec = parse(&dgml(case, backend));
    let problem = tie_problem(&spec, &case.ties);
    let expected = problem.expected_output(&spec).map_err(|e| e.to_string())?;
    let d = problem.output().expect("the spec has an output").clone();
    let size = d.dtype.size_bytes() as usize;
    let at = |r: u64, c: u64| d.geometry.offset(r, c) as usize * size;
    for r in 0..SHAPE.m {
        for c in 0..SHAPE.n {
            let want = case.ties[entry(r, c, case.ties.len())].1;
            let got = decode(d.dtype, &expected[at(r, c)..at(r, c) + size]);
            if !same(got, want) {
                return Err(format!("CPU reference at ({r}, {c}): {got}, not {want}"));
            }
        }
    }

    let kernel = generate(&spec, backend)?;
    let (compiled, _) = compile_kernel(&kernel).map_err(|e| e.to_string())?;
    let loaded = gpu.load(&kernel, &compiled).map_err(|e| e.to_string())?;
    let device = DeviceProblem::from_problem(gpu, problem, 0).map_err(|e| e.to_string())?;
    let prepared = loaded
        .prepare(gpu, &spec, &device.launch_args())
        .map_err(|e| e.to_string())?;
    device.poison_output(gpu).map_err(|e| e.to_string())?;
    prepared.enqueue(gpu).map_err(|e| e.to_string())?;
    let out = device.download_output(gpu).map_err(|e| e.to_string())?;

    let mut wrong = Vec::new();
    for r in 0..SHAPE.m {
        for c in 0..SHAPE.n {
            let (got, want) = (
                &out[at(r, c)..at(r, c) + size],
                &expected[at(r, c)..at(r, c) + size],
            );
            if got != want {
                let acc = case.ties[entry(r, c, case.ties.len())].0;
                wrong.push(format!(
                    "({r}, {c}) acc {acc}: GPU {} ({got:02x?}), CPU {} ({want:02x?})",
                    decode(d.dtype, got),
                    decode(d.dtype, want)
                ));
            }
        }
    }
    if wrong.is_empty() {
        Ok(kernel.plan.label())
    } else {
        let shown = wrong.len().min(12);
        Err(format!(
            "{} of {} elements differ; the first {shown}:\n    {}",
            wrong.len(),
            SHAPE.m * SHAPE.n,
            wrong[..shown].join("\n    ")
        ))
    }
}

/// Every case on `backend`, each reported; fails with all the failures.
fn check_ties(backend: Backend) {
    let gpu = gpu();
    let mut failures = Vec::new();
    for case in cases() {
        let name = format!("D: {} = {}", case.output, case.expr);
        match check_case(&gpu, &case, backend) {
            Ok(plan) => println!("ok   {name:<24} {plan}"),
            Err(e) => {
                println!("FAIL {name:<24} {e}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} roundings differ from the CPU reference on {backend}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn gpu_epilogue_ties_sm80() {
    check_ties(Backend::Sm80);
}

#[test]
fn gpu_epilogue_ties_simt() {
    check_ties(Backend::Simt);
}

#[test]
fn gpu_epilogue_ties_gemv() {
    check_ties(Backend::Gemv);
}
