//! The tie cases of gpu_epilogue_ties: accumulators on exact ties of `cast<i8>`, `cast<f16>`,
//! `cast<bf16>` and the f16/bf16 stores, built from bf16 inputs whose GEMM is exact in f32.
//! nvrtc_gpu_matrix compiles the same kernels without a GPU.

use deepgemm::codec::encode_into;
use deepgemm::dtype::DType;
use deepgemm::plan::{Backend, Shape};
use deepgemm::reference::{Problem, ProblemOptions};
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::DeviceProblem;

/// M and N are not multiples of the tiles, so edge tiles round too; K holds [`PARTS`] terms for
/// each of up to 21 table entries.
pub const SHAPE: Shape = Shape {
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
pub struct TieCase {
    pub output: &'static str,
    pub expr: &'static str,
    pub rounding: DType,
    pub ties: Vec<(f64, f64)>,
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

pub fn cases() -> Vec<TieCase> {
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

pub fn dgml(case: &TieCase, backend: Backend) -> String {
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
pub fn entry(r: u64, c: u64, entries: usize) -> usize {
    (c as usize % entries + r as usize) % entries
}

/// Inputs whose product is `ties[entry(r, c)].0` at every (r, c): row r of A holds the parts of
/// entry (j + r) % L at k = PARTS·j.., column c of B holds ones at k = PARTS·(c % L)...
pub fn tie_problem(spec: &KernelSpec, ties: &[(f64, f64)]) -> Problem {
    let entries = ties.len();
    assert!(entries * PARTS <= SHAPE.k as usize);
    let mut problem = Problem::generate(spec, SHAPE, &ProblemOptions::default()).unwrap();
    let parts: Vec<Vec<f64>> = ties.iter().map(|&(v, _)| bf16_parts(v)).collect();
    set_operands(
        &mut problem,
        |r, k| {
            let (j, part) = (k as usize / PARTS, k as usize % PARTS);
            if j >= entries {
                return 0.0;
            }
            let p = &parts[(j + r as usize) % entries];
            p.get(part).copied().unwrap_or(0.0)
        },
        |k, c| {
            if k as usize / PARTS == c as usize % entries {
                1.0
            } else {
                0.0
            }
        },
    );
    problem
}

/// Overwrites A and B of `problem` with `a(row, k)` and `b(k, col)`, encoded in their dtypes.
pub fn set_operands(
    problem: &mut Problem,
    a: impl Fn(u64, u64) -> f64,
    b: impl Fn(u64, u64) -> f64,
) {
    for tensor in &mut problem.tensors {
        let value: &dyn Fn(u64, u64) -> f64 = match tensor.name.as_str() {
            "A" => &a,
            "B" => &b,
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
}

/// Generates, compiles and runs `spec` on `backend` over `problem` (its output poisoned first):
/// the plan's label and D's bytes.
pub fn run_on_gpu(
    gpu: &Gpu,
    spec: &KernelSpec,
    backend: Backend,
    problem: Problem,
) -> Result<(String, Vec<u8>), String> {
    let kernel = super::generate(spec, backend)?;
    let (compiled, _) = compile_kernel(&kernel).map_err(|e| e.to_string())?;
    let loaded = gpu.load(&kernel, &compiled).map_err(|e| e.to_string())?;
    let device = DeviceProblem::from_problem(gpu, problem, 0).map_err(|e| e.to_string())?;
    let prepared = loaded
        .prepare(gpu, spec, &device.launch_args())
        .map_err(|e| e.to_string())?;
    device.poison_output(gpu).map_err(|e| e.to_string())?;
    prepared.enqueue(gpu).map_err(|e| e.to_string())?;
    let out = device.download_output(gpu).map_err(|e| e.to_string())?;
    Ok((kernel.plan.label(), out))
}
