//! The epilogue's roundings on a real GPU, at exact ties: `cast<i8>`, `cast<f16>` and
//! `cast<bf16>` of the accumulator, and the f16 and bf16 stores of D. The inputs are chosen so
//! that every accumulator is exact in f32 and lands on a tie (or just off one, or past a
//! saturation limit) of the rounding under test; the kernel's output must then equal the CPU
//! reference's bytes exactly (`Problem::expected_output`), and the reference must give the values
//! listed here. Also the tensor cores' rounding of tf32 inputs from f32, near and at ties.
//! Run on the GPU machine (scripts/gpu.sh); without a GPU every test fails.

mod gpu_support;

use deepgemm::codec::{decode, round_to};
use deepgemm::plan::{Backend, Shape};
use deepgemm::reference::{Problem, ProblemOptions};
use deepgemm_cuda::device::Gpu;
use gpu_support::ties::{
    cases, dgml, entry, run_on_gpu, set_operands, tie_problem, TieCase, SHAPE,
};
use gpu_support::{gpu, parse};

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

    let (plan, out) = run_on_gpu(gpu, &spec, backend, problem)?;

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
        Ok(plan)
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

#[test]
fn gpu_epilogue_ties_tiny() {
    check_ties(Backend::Tiny);
}

/// f32 inputs to a tf32 GEMM as bit patterns, with the tf32 value the tensor cores must multiply:
/// the nearest, ties away from zero, on both backends (sm80's `cvt.rna` at each fragment, sm90's
/// copy engine through TFLOAT32 tensor maps, measured so on the H200: bench/RESULTS.md,
/// 2026-12-05). Truncation (what wgmma does to unrounded f32) gives another value on six of the
/// rows, rounding ties to even on the two ties below an even mantissa.
const TF32_ROUNDINGS: [(u32, u32); 8] = [
    (0x3F80_1400, 0x3F80_2000), // 1 + 0.625 ulp: up
    (0x3F80_0FFF, 0x3F80_0000), // just below half an ulp: down
    (0x3F80_1000, 0x3F80_2000), // a tie below an even mantissa: away from zero
    (0x3F80_3000, 0x3F80_4000), // a tie below an odd mantissa: up
    (0xBF80_1000, 0xBF80_2000), // the negative tie: away from zero
    (0xBF80_1400, 0xBF80_2000), // negative, past half: away from zero
    (0x3FFF_F000, 0x4000_0000), // a tie that carries into the exponent
    (0x4049_0FDB, 0x4049_0000), // pi: down
];

/// A tf32 GEMM on `backend` whose every output is one rounded input of A plus one of B:
/// `A[r][0] = a_r`, `B[0][c] = 1`, `A[r][1] = 1`, `B[1][c] = b_c`, zeros elsewhere, so that
/// `D[r][c] = round(a_r) + round(b_c)`, exact in f32. Checks every D exactly.
fn check_tf32_rounding(backend: Backend) {
    let shape = Shape {
        m: 48,
        n: 80,
        k: 64,
    };
    let spec = parse(&format!(
        "kernel tf32_rounding {{\n  target h200;\n  input A: tf32[M, K] row;\n\
         input B: tf32[K, N] col;\n  output D: f32[M, N] row;\n\
         shape {{ M = {}; N = {}; K = {}; }}\n  constraints {{ backend == {backend}; }}\n}}\n",
        shape.m, shape.n, shape.k
    ));
    let entries = TF32_ROUNDINGS.len() as u64;
    let input = |i: u64| f32::from_bits(TF32_ROUNDINGS[i as usize].0) as f64;
    let mut problem = Problem::generate(&spec, shape, &ProblemOptions::default()).unwrap();
    set_operands(
        &mut problem,
        |r, k| match k {
            0 => input(r % entries),
            1 => 1.0,
            _ => 0.0,
        },
        |k, c| match k {
            0 => 1.0,
            1 => input((c + 3) % entries),
            _ => 0.0,
        },
    );
    let d = problem.output().expect("the spec has an output").clone();
    let (plan, out) = run_on_gpu(&gpu(), &spec, backend, problem).unwrap();
    let want_of = |i: u64| f32::from_bits(TF32_ROUNDINGS[i as usize].1);
    let mut wrong = Vec::new();
    for r in 0..shape.m {
        for c in 0..shape.n {
            let (i, j) = (r % entries, (c + 3) % entries);
            let want = want_of(i) + want_of(j);
            let at = d.geometry.offset(r, c) as usize * 4;
            let got = f32::from_le_bytes(out[at..at + 4].try_into().unwrap());
            // Compared as values: a sum to zero may come out as either zero (NaN, the poison,
            // equals nothing).
            if got != want {
                wrong.push(format!(
                    "({r}, {c}): {got:e} ({:#010x}), want {want:e} ({:#010x}) from {:#010x} + {:#010x}",
                    got.to_bits(),
                    want.to_bits(),
                    TF32_ROUNDINGS[i as usize].0,
                    TF32_ROUNDINGS[j as usize].0
                ));
            }
        }
    }
    println!(
        "{}: {} of {} outputs wrong",
        plan,
        wrong.len(),
        shape.m * shape.n
    );
    assert!(
        wrong.is_empty(),
        "{backend} ({}): {} of {} tf32 roundings differ; the first:\n    {}",
        plan,
        wrong.len(),
        shape.m * shape.n,
        wrong[..wrong.len().min(12)].join("\n    ")
    );
}

#[test]
fn gpu_tf32_inputs_round_ties_away_on_sm80() {
    check_tf32_rounding(Backend::Sm80);
}

#[test]
fn gpu_tf32_inputs_round_ties_away_on_sm90() {
    check_tf32_rounding(Backend::Sm90);
}
