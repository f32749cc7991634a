//! The epilogue's roundings on a real GPU, at exact ties: `cast<i8>`, `cast<f16>` and
//! `cast<bf16>` of the accumulator, and the f16 and bf16 stores of D. The inputs are chosen so
//! that every accumulator is exact in f32 and lands on a tie (or just off one, or past a
//! saturation limit) of the rounding under test; the kernel's output must then equal the CPU
//! reference's bytes exactly (`Problem::expected_output`), and the reference must give the values
//! listed here. Run on the GPU machine (scripts/gpu.sh); without a GPU every test fails.

mod gpu_support;

use deepgemm::codec::{decode, encode_into, round_to};
use deepgemm::dtype::DType;
use deepgemm::plan::{Backend, Shape};
use deepgemm::reference::{Problem, ProblemOptions};
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::DeviceProblem;
use gpu_support::{generate, gpu, parse};

/// M and N are not multiples of the tiles, so edge tiles round too; K holds [`PARTS`] terms for
/// each of up to 21 table entries.
const SHAPE: Shape = Shape {
    m: 48,
    n: 80,
    k: 64,
};
/// Each accumulator is the sum of at most this many bf16 inputs (times 1).
const PARTS: usize = 3;

fn p2(e: i32) -> f64 {
    2f64.powi(e)
}

/// One rounding under test: the epilogue, D's dtype, the rounding's dtype, and accumulator
/// values with the value the rounding must give.
struct TieCase {
    output: &'static str,
    expr: &'static str,
    rounding: DType,
    ties: Vec<(f64, f64)>,
}

fn i8_ties() -> Vec<(f64, f64)> {
    vec![
        (0.5, 0.0),
        (1.5, 2.0),
        (2.5, 2.0),
        (3.5, 4.0),
        (-0.5, -0.0),
        (-1.5, -2.0),
        (-2.5, -2.0),
        (-3.5, -4.0),
        (2.5 + p2(-6), 3.0),
        (2.5 - p2(-6), 2.0),
        (100.5, 100.0),
        (101.5, 102.0),
        (126.5, 126.0),
        (127.5, 127.0),
        (-127.5, -128.0),
        (-128.5, -128.0),
        (1000.0, 127.0),
        (-1000.0, -128.0),
    ]
}

fn f16_ties() -> Vec<(f64, f64)> {
    vec![
        (1.0 + p2(-11), 1.0),
        (1.0 + 3.0 * p2(-11), 1.0 + p2(-9)),
        (-(1.0 + p2(-11)), -1.0),
        (1.0 + p2(-11) + p2(-16), 1.0 + p2(-10)),
        (2049.0, 2048.0),
        (2051.0, 2052.0),
        (-2051.0, -2052.0),
        (p2(-25), 0.0),
        (3.0 * p2(-25), p2(-23)),
        (p2(-14) + p2(-25), p2(-14)),
        (65519.0, 65504.0),
        (65520.0, f64::INFINITY),
        (-65520.0, f64::NEG_INFINITY),
    ]
}

fn bf16_ties() -> Vec<(f64, f64)> {
    vec![
        (1.0 + p2(-8), 1.0),
        (1.0 + 3.0 * p2(-8), 1.0 + p2(-6)),
        (-(1.0 + p2(-8)), -1.0),
        (1.0 + p2(-8) + p2(-20), 1.0 + p2(-7)),
        (257.0, 256.0),
        (259.0, 260.0),
        (-259.0, -260.0),
        (257.0 + p2(-10), 258.0),
        (p2(-100) * (1.0 + p2(-8)), p2(-100)),
    ]
}

fn cases() -> Vec<TieCase> {
    vec![
        TieCase {
            output: "f32",
            expr: "cast<i8>(acc)",
            rounding: DType::I8,
            ties: i8_ties(),
        },
        TieCase {
            output: "f32",
            expr: "cast<f16>(acc)",
            rounding: DType::F16,
            ties: f16_ties(),
        },
        TieCase {
            output: "f32",
            expr: "cast<bf16>(acc)",
            rounding: DType::Bf16,
            ties: bf16_ties(),
        },
        TieCase {
            output: "bf16",
            expr: "acc",
            rounding: DType::Bf16,
            ties: bf16_ties(),
        },
        TieCase {
            output: "f16",
            expr: "acc",
            rounding: DType::F16,
            ties: f16_ties(),
        },
    ]
}

fn dgml(case: &TieCase, backend: Backend) -> String {
    let Shape { m, n, k } = SHAPE;
    format!(
        "kernel ties {{\n  target h200;\n  input A: bf16[M, K] row;\n  input B: bf16[K, N] col;\n\
         output D: {}[M, N] row;\n  accumulate f32;\n  epilogue D = {};\n\
         shape {{ M = {m}; N = {n}; K = {k}; }}\n  constraints {{ backend == {backend}; }}\n}}\n",
        case.output, case.expr
    )
}

/// `v` as a sum of at most [`PARTS`] bf16 values, largest first (each the bf16 truncation of
/// what is left), so that a GEMM with ones on the other side sums it back exactly.
fn bf16_parts(v: f64) -> Vec<f64> {
    let mut parts = Vec::new();
    let mut rest = v;
    while rest != 0.0 {
        assert_eq!(rest as f32 as f64, rest, "{v} is not exact in f32");
        let part = f32::from_bits((rest as f32).to_bits() & 0xFFFF_0000) as f64;
        parts.push(part);
        rest -= part;
    }
    assert!(parts.len() <= PARTS, "{v} needs {} bf16 parts", parts.len());
    parts
}

/// The table entry whose value the accumulator at (r, c) holds.
fn entry(r: u64, c: u64, entries: usize) -> usize {
    (c as usize % entries + r as usize) % entries
}

/// Inputs whose product is `ties[entry(r, c)].0` at every (r, c): row r of A holds the parts of
/// entry (j + r) % L at k = PARTS·j.., column c of B holds ones at k = PARTS·(c % L)...
fn tie_problem(spec: &deepgemm::spec::KernelSpec, ties: &[(f64, f64)]) -> Problem {
    let entries = ties.len();
    assert!(entries * PARTS <= SHAPE.k as usize);
    let mut problem = Problem::generate(spec, SHAPE, &ProblemOptions::default()).unwrap();
    let parts: Vec<Vec<f64>> = ties.iter().map(|&(v, _)| bf16_parts(v)).collect();
    for tensor in &mut problem.tensors {
        let value: Box<dyn Fn(u64, u64) -> f64> = match tensor.name.as_str() {
            "A" => Box::new(|r, k| {
                let (j, part) = (k as usize / PARTS, k as usize % PARTS);
                if j >= entries {
                    return 0.0;
                }
                let p = &parts[(j + r as usize) % entries];
                p.get(part).copied().unwrap_or(0.0)
            }),
            "B" => Box::new(|k, c| {
                let j = k as usize / PARTS;
                if j == c as usize % entries {
                    1.0
                } else {
                    0.0
                }
            }),
            _ => continue,
        };
        let g = tensor.geometry;
        let size = tensor.dtype.size_bytes() as usize;
        for r in 0..g.rows {
            for c in 0..g.cols {
                let at = g.offset(r, c) as usize * size;
                encode_into(tensor.dtype, value(r, c), &mut tensor.bytes[at..at + size]);
            }
        }
    }
    problem
}

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
