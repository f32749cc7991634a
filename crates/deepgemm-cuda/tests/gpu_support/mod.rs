//! What the GPU tests share: the GPU (required, never skipped), specs built from `.dgml` text,
//! plans forced to one backend through the search's `backend == ...` constraint, and a matrix
//! runner that reports every case before failing.

#![allow(dead_code)] // each test file uses a different part of this module

pub mod ties;

use deepgemm::codegen::{self, GeneratedKernel};
use deepgemm::plan::{Backend, Shape};
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::{run, RunOptions, RunReport};
use std::path::Path;

/// Opens GPU 0 or fails the test with the reason: a GPU test never passes without a GPU.
pub fn gpu() -> Gpu {
    match Gpu::open(0) {
        Ok(gpu) => gpu,
        Err(e) => panic!("gpu_* tests need an NVIDIA GPU and driver: {e}"),
    }
}

/// One GEMM to check: dtypes, layouts, epilogue, shape.
#[derive(Debug, Clone)]
pub struct Case {
    pub input: &'static str,
    pub output: &'static str,
    /// `row` or `col` for A, B, D (and C, which follows D).
    pub layouts: [&'static str; 3],
    pub epilogue: Epilogue,
    pub shape: Shape,
    pub ld_pad: u64,
    pub base_offset_bytes: u64,
    /// Constraints beyond the backend, e.g. a tiling that forces a schedule.
    pub constraints: &'static str,
    /// B's dtype when it differs from A's (fp8 e4m3 x e5m2).
    pub input_b: Option<&'static str>,
    pub scaling: Scaling,
    /// An amax output of D: `f32[M]` (true) or `f32[]` (false).
    pub amax_per_row: Option<bool>,
}

/// The FP8 scale tensors of a case (SPEC `scale_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scaling {
    None,
    /// `f32[]` for both.
    PerTensor,
    /// `f32[M]` for A, `f32[N]` for B.
    PerRowAndColumn,
    /// DeepSeek's recipe: A `f32[M, K/128]` column-major (1x128), B `f32[N/128, K/128]` (128x128).
    Blocks,
    /// The same blocks with the other layout of each scale tensor.
    BlocksTransposed,
    /// A per row, B in 128x128 blocks: one scale in the epilogue, one at each promotion.
    RowsAndBlocks,
    /// 1x128 blocks for both (weight gradients): B `f32[N, K/128]`, one scale per column and
    /// 128 of K (a scale per fragment column at each promotion).
    RowBlocksBoth,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    Plain,
    /// `alpha * acc + beta * C`, alpha = 1.5, beta = -0.75.
    AlphaBetaC,
    /// `gelu(acc + bias)` (exact erf form) with a bias along N.
    BiasGelu,
    /// `gelu_tanh(alpha * acc + bias)`.
    BiasGeluTanh,
    /// `acc * d_scale`, d_scale = 64: quantizing to an fp8 D, sums of O(10) saturate at 448.
    Quantize,
}

impl Case {
    pub fn new(input: &'static str, output: &'static str, shape: (u64, u64, u64)) -> Case {
        Case {
            input,
            output,
            layouts: ["row", "col", "row"],
            epilogue: Epilogue::Plain,
            shape: Shape::new(shape.0, shape.1, shape.2),
            ld_pad: 0,
            base_offset_bytes: 0,
            constraints: "",
            input_b: None,
            scaling: Scaling::None,
            amax_per_row: None,
        }
    }

    pub fn amax(mut self, per_row: bool) -> Case {
        self.amax_per_row = Some(per_row);
        self
    }

    pub fn input_b(mut self, dtype: &'static str) -> Case {
        self.input_b = Some(dtype);
        self
    }

    pub fn scaling(mut self, scaling: Scaling) -> Case {
        self.scaling = scaling;
        self
    }

    pub fn constraints(mut self, constraints: &'static str) -> Case {
        self.constraints = constraints;
        self
    }

    pub fn layouts(mut self, layouts: [&'static str; 3]) -> Case {
        self.layouts = layouts;
        self
    }

    pub fn epilogue(mut self, epilogue: Epilogue) -> Case {
        self.epilogue = epilogue;
        self
    }

    pub fn ld_pad(mut self, pad: u64) -> Case {
        self.ld_pad = pad;
        self
    }

    pub fn base_offset(mut self, bytes: u64) -> Case {
        self.base_offset_bytes = bytes;
        self
    }

    /// The `.dgml` text of this case, forced to `backend`.
    pub fn dgml(&self, backend: Backend) -> String {
        let [la, lb, ld] = self.layouts;
        let (input, output) = (self.input, self.output);
        let input_b = self.input_b.unwrap_or(input);
        let scales = match self.scaling {
            Scaling::None => "",
            Scaling::PerTensor => "  input sa: f32[] scale_of A;\n  input sb: f32[] scale_of B;\n",
            Scaling::PerRowAndColumn => {
                "  input sa: f32[M] scale_of A;\n  input sb: f32[N] scale_of B;\n"
            }
            Scaling::Blocks => {
                "  input sa: f32[M, K/128] col scale_of A;\n  input sb: f32[N/128, K/128] row scale_of B;\n"
            }
            Scaling::BlocksTransposed => {
                "  input sa: f32[M, K/128] row scale_of A;\n  input sb: f32[N/128, K/128] col scale_of B;\n"
            }
            Scaling::RowsAndBlocks => {
                "  input sa: f32[M] scale_of A;\n  input sb: f32[N/128, K/128] row scale_of B;\n"
            }
            Scaling::RowBlocksBoth => {
                "  input sa: f32[M, K/128] col scale_of A;\n  input sb: f32[N, K/128] col scale_of B;\n"
            }
        };
        let Shape { m, n, k } = self.shape;
        let (extra, params, expr) = match self.epilogue {
            Epilogue::Plain => (String::new(), "", "acc"),
            Epilogue::AlphaBetaC => (
                format!("  input C: {output}[M, N] {ld};\n"),
                "  param alpha: f32 = 1.5;\n  param beta: f32 = -0.75;\n",
                "alpha * acc + beta * C",
            ),
            Epilogue::BiasGelu => (
                format!("  input bias: {output}[N];\n"),
                "",
                "gelu(acc + bias)",
            ),
            Epilogue::BiasGeluTanh => (
                format!("  input bias: {output}[N];\n"),
                "  param alpha: f32 = 0.5;\n",
                "gelu_tanh(alpha * acc + bias)",
            ),
            Epilogue::Quantize => (
                String::new(),
                "  param d_scale: f32 = 64.0;\n",
                "acc * d_scale",
            ),
        };
        let amax = match self.amax_per_row {
            Some(true) => "  output amax: f32[M] amax_of D;\n",
            Some(false) => "  output amax: f32[] amax_of D;\n",
            None => "",
        };
        format!(
            "kernel t {{\n  target h200;\n  input A: {input}[M, K] {la};\n  input B: {input_b}[K, N] {lb};\n\
             {scales}{extra}  output D: {output}[M, N] {ld};\n{amax}{params}  accumulate f32;\n  epilogue D = {expr};\n\
             shape {{ M = {m}; N = {n}; K = {k}; }}\n  constraints {{ backend == {backend}; {} }}\n}}\n",
            self.constraints
        )
    }

    pub fn options(&self, seed: u64) -> RunOptions {
        RunOptions {
            seed,
            ld_pad: self.ld_pad,
            base_offset_bytes: self.base_offset_bytes,
            params: vec![],
            timing: None,
        }
    }

    pub fn name(&self) -> String {
        format!(
            "{}{}{}->{}{} {}{}{} {:?} {}{}{}{}",
            self.input,
            self.input_b.map(|b| format!("x{b}")).unwrap_or_default(),
            if self.scaling == Scaling::None {
                String::new()
            } else {
                format!(" {:?}", self.scaling)
            },
            self.output,
            match self.amax_per_row {
                Some(true) => " +amax[M]",
                Some(false) => " +amax",
                None => "",
            },
            &self.layouts[0][..1],
            &self.layouts[1][..1],
            &self.layouts[2][..1],
            self.epilogue,
            self.shape,
            if self.ld_pad > 0 {
                format!(" ld+{}", self.ld_pad)
            } else {
                String::new()
            },
            if self.base_offset_bytes > 0 {
                format!(" ptr+{}B", self.base_offset_bytes)
            } else {
                String::new()
            },
            if self.constraints.is_empty() {
                String::new()
            } else {
                format!(" [{}]", self.constraints)
            },
        )
    }
}

/// Parses a one-kernel `.dgml` text, printing the diagnostics if it does not check.
pub fn parse(text: &str) -> KernelSpec {
    match deepgemm::spec::parse_str(text, "case.dgml", Path::new(".")) {
        Ok(mut file) => file.kernels.remove(0),
        Err(diagnostics) => panic!("{diagnostics:?}\nin:\n{text}"),
    }
}

/// The spec and the search's best plan for it, generated.
pub fn kernel(case: &Case, backend: Backend) -> Result<(KernelSpec, GeneratedKernel), String> {
    let spec = parse(&case.dgml(backend));
    let kernel = generate(&spec, backend)?;
    Ok((spec, kernel))
}

/// The search's best plan for `spec` (whose constraints force `backend`), generated.
pub fn generate(spec: &KernelSpec, backend: Backend) -> Result<GeneratedKernel, String> {
    let result = deepgemm::search::search(spec).map_err(|e| format!("search: {e}"))?;
    let plan = result.buckets[0].winner().plan.clone();
    if plan.backend != backend {
        return Err(format!(
            "the search chose {} instead of {backend}",
            plan.backend
        ));
    }
    codegen::generate(spec, &plan, "v0").map_err(|e| format!("codegen: {e}"))
}

/// A seed that differs from run to run (fresh inputs for every check), printed on failure.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Runs every case on `backend` and fails with a table of all of them if any failed.
pub fn check_matrix(gpu: &Gpu, backend: Backend, cases: &[Case]) -> Vec<RunReport> {
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for case in cases {
        let seed = fresh_seed();
        let outcome = kernel(case, backend).and_then(|(spec, kernel)| {
            run(gpu, &spec, &kernel, case.shape, &case.options(seed)).map_err(|e| e.to_string())
        });
        match outcome {
            Ok(report) => {
                // What an fp8 D's per-element rule and an amax check found (a failure says which).
                let fp8 = report.fp8.map_or(String::new(), |f| {
                    format!(
                        " fp8 excess {:.2e} (<= {:.2e})",
                        f.worst_excess, f.allowed_excess
                    )
                });
                let amax = report.amax.map_or(String::new(), |a| {
                    format!(" amax error {:.2e} (<= {:.0e})", a.error, a.tolerance)
                });
                let line = format!(
                    "{:<60} {:<28} error {:.2e} (< {:.0e}){fp8}{amax} unwritten {} checked {}{} repacked {:?} regs {} seed {seed}",
                    case.name(),
                    report.plan,
                    report.error,
                    report.tolerance,
                    report.unwritten_count,
                    report.checked_elements,
                    if report.sampled { " (sampled)" } else { "" },
                    report.repacked,
                    report.resources.registers,
                );
                println!("{} {line}", if report.passed { "ok  " } else { "FAIL" });
                if !report.passed {
                    failures.push(line);
                }
                reports.push(report);
            }
            Err(e) => {
                println!("FAIL {} on {backend}: {e} (seed {seed})", case.name());
                failures.push(format!("{}: {e}", case.name()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on {backend}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    reports
}

// ---------------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------------

pub const LAYOUTS: [[&str; 3]; 8] = [
    ["row", "row", "row"],
    ["row", "col", "row"],
    ["col", "row", "row"],
    ["col", "col", "row"],
    ["row", "row", "col"],
    ["row", "col", "col"],
    ["col", "row", "col"],
    ["col", "col", "col"],
];

pub fn layouts() -> Vec<Case> {
    LAYOUTS
        .iter()
        .map(|&l| Case::new("bf16", "bf16", (127, 129, 255)).layouts(l))
        .collect()
}

/// f16/bf16 inputs with every output type (fp8 ones saturating), at a shape with ragged edges on
/// all three extents.
pub fn half_dtypes() -> Vec<Case> {
    let mut cases = Vec::new();
    for input in ["bf16", "f16"] {
        for output in ["bf16", "f16", "f32", "e4m3", "e5m2"] {
            cases.push(Case::new(input, output, (17, 33, 65)));
            cases.push(Case::new(input, output, (1000, 3000, 2000)));
        }
        cases.push(Case::new(input, "e4m3", (1000, 3000, 2000)).epilogue(Epilogue::Quantize));
    }
    cases
}

/// Every shape of the matrix, bf16 NT.
pub fn shapes() -> Vec<Case> {
    [
        (1, 1, 1),
        (1, 8192, 8192),
        (17, 33, 65),
        (127, 129, 255),
        (64, 64, 7),
        (4095, 4097, 4093),
        (1000, 3000, 2000),
        (8192, 8192, 8192),
    ]
    .into_iter()
    .map(|s| Case::new("bf16", "bf16", s))
    .collect()
}

pub fn epilogues(input: &'static str) -> Vec<Case> {
    let mut cases = Vec::new();
    for layouts in [["row", "col", "row"], ["col", "row", "col"]] {
        for epilogue in [
            Epilogue::AlphaBetaC,
            Epilogue::BiasGelu,
            Epilogue::BiasGeluTanh,
        ] {
            cases.push(
                Case::new(input, input, (127, 129, 255))
                    .layouts(layouts)
                    .epilogue(epilogue),
            );
        }
    }
    cases.push(Case::new(input, input, (1000, 3000, 2000)).epilogue(Epilogue::BiasGeluTanh));
    cases
}

/// ld = K+1 (and M+1, N+1 for the other layouts) and every base pointer 2 bytes off: the
/// launcher repacks what the kernel's copies cannot read.
pub fn padded_and_offset(input: &'static str, output: &'static str) -> Vec<Case> {
    let mut cases = Vec::new();
    for layouts in [["row", "col", "row"], ["col", "row", "col"]] {
        for shape in [(127, 129, 255), (4095, 4097, 4093)] {
            cases.push(Case::new(input, output, shape).layouts(layouts).ld_pad(1));
            cases.push(
                Case::new(input, output, shape)
                    .layouts(layouts)
                    .base_offset(2),
            );
        }
    }
    cases.push(
        Case::new(input, output, (127, 129, 255))
            .ld_pad(1)
            .base_offset(2)
            .epilogue(Epilogue::AlphaBetaC),
    );
    cases
}

/// f32 at the K where tf32 precision shows (issue 9: 2.6e-4 at K = 4096), both B layouts.
pub fn f32_long_k() -> Vec<Case> {
    let mut cases = Vec::new();
    for k in [4096, 16384] {
        cases.push(Case::new("f32", "f32", (2048, 2048, k)).layouts(["row", "row", "row"]));
        cases.push(Case::new("f32", "f32", (1000, 3000, k)).layouts(["col", "col", "row"]));
    }
    cases
}

/// Every case the correctness tests run on `backend`.
pub fn matrix(backend: Backend) -> Vec<Case> {
    let mut cases = layouts();
    cases.extend(half_dtypes());
    cases.extend(shapes());
    cases.extend(epilogues("bf16"));
    cases.extend(epilogues("f16"));
    match backend {
        Backend::Simt => {
            cases.extend(f32_long_k());
            cases.push(Case::new("f32", "f32", (17, 33, 65)));
            cases.push(Case::new("f32", "f32", (1000, 3000, 2000)));
            cases.push(Case::new("tf32", "f32", (127, 129, 255)));
            cases.extend(padded_and_offset("bf16", "f32"));
            cases.extend(padded_and_offset("f32", "f32"));
        }
        Backend::Sm90 => {
            cases.extend(padded_and_offset("bf16", "bf16"));
            cases.extend(sm90_schedules());
            cases.extend(sm90_tf32());
        }
        Backend::Gemv => {
            cases.retain(gemv_takes);
            cases.extend(gemv());
        }
        Backend::Tiny => {
            cases.retain(tiny_takes);
            cases.extend(tiny());
        }
        Backend::Sm80 => {
            cases.push(Case::new("tf32", "f32", (17, 33, 65)));
            cases.push(Case::new("tf32", "f32", (1000, 3000, 2000)));
            cases.extend(padded_and_offset("bf16", "bf16"));
        }
    }
    cases
}

/// tf32 on wgmma (K-major only): ragged edges, K below one k-tile (32), every D type the
/// epilogue writes, C with alpha and beta, and operands the launcher repacks for TMA (ld = K + 1,
/// a base 4 bytes off).
pub fn sm90_tf32() -> Vec<Case> {
    let mut cases = Vec::new();
    for output in ["f32", "bf16", "f16"] {
        cases.push(Case::new("tf32", output, (17, 33, 65)));
        cases.push(Case::new("tf32", output, (1000, 3000, 2000)));
    }
    cases.push(Case::new("tf32", "f32", (64, 64, 7)));
    cases.push(Case::new("tf32", "f32", (127, 129, 255)).layouts(["row", "col", "col"]));
    cases.push(Case::new("tf32", "f32", (127, 129, 255)).epilogue(Epilogue::AlphaBetaC));
    cases.push(Case::new("tf32", "f32", (127, 129, 255)).ld_pad(1));
    cases.push(Case::new("tf32", "f32", (4095, 4097, 4093)).base_offset(4));
    cases
}

/// Whether a case of the shared matrix is gemv's: NT (it streams K-major operands only) and
/// small enough for the CUDA cores (4095x4097x4093 and 8192^3 would take seconds there).
pub fn gemv_takes(case: &Case) -> bool {
    let Shape { m, n, k } = case.shape;
    case.layouts == ["row", "col", "row"] && m * n * k <= 1 << 33
}

/// The gemv kernel (NT only): both operands streamed, every small-side width forced, K below one
/// 16-byte word and not a multiple of one, rows at every 2-byte skew (ld = K + 1, 2-byte-offset
/// bases, odd K), the shortest and the longest chunks of the ring, f32 / tf32 / f16 inputs, fp8 D
/// with amax, epilogues.
pub fn gemv() -> Vec<Case> {
    const FORCED: [&str; 8] = [
        "TILE_N == 1; TILE_M == 16;",
        "TILE_N == 2; TILE_M == 16;",
        "TILE_N == 4; TILE_M == 16;",
        "TILE_N == 8; TILE_M == 16;",
        "TILE_M == 1; TILE_N == 16;",
        "TILE_M == 2; TILE_N == 16;",
        "TILE_M == 4; TILE_N == 16;",
        "TILE_M == 8; TILE_N == 16;",
    ];
    let mut cases = Vec::new();
    for constraints in FORCED {
        for shape in [(3001, 7, 3001), (7, 3001, 3001), (37, 41, 1000)] {
            cases.push(Case::new("bf16", "bf16", shape).constraints(constraints));
        }
        cases.push(
            Case::new("bf16", "bf16", (300, 5, 777))
                .ld_pad(1)
                .constraints(constraints),
        );
    }
    for shape in [
        (1, 1, 1),
        (2, 300, 1),
        (5, 1000, 7),
        (1000, 3, 9),
        (1, 8192, 8192),
        (8, 4096, 4096),
        (16, 6144, 4096),
        (1000, 3, 2000),
    ] {
        cases.push(Case::new("bf16", "bf16", shape));
    }
    for shape in [(3001, 7, 3001), (7, 3001, 3001), (1, 4097, 4093)] {
        cases.push(Case::new("bf16", "bf16", shape).ld_pad(1));
        cases.push(Case::new("bf16", "bf16", shape).base_offset(2));
        cases.push(Case::new("bf16", "bf16", shape).ld_pad(3).base_offset(2));
    }
    // The ring's ends: two stages of one step of K, two-step chunks (a K tail inside a chunk,
    // several chunks in flight) and four-step ones (the mma k-steps in two unrolled halves), at
    // a skew.
    for constraints in [
        "STAGES == 2; TILE_K == 256;",
        "STAGES == 3; TILE_K == 512;",
        "STAGES == 2; TILE_K == 1024;",
        "STAGES == 4; TILE_K == 1024;",
    ] {
        for shape in [(3001, 7, 3001), (2, 5000, 2500)] {
            cases.push(
                Case::new("bf16", "bf16", shape)
                    .ld_pad(1)
                    .constraints(constraints),
            );
        }
    }
    cases.push(Case::new("f32", "f32", (5, 1000, 999)).ld_pad(1));
    cases.push(Case::new("f32", "f32", (999, 3, 4096)).base_offset(4));
    cases.push(Case::new("tf32", "f32", (999, 3, 1000)));
    cases.push(Case::new("f16", "f32", (8, 2000, 1000)).base_offset(2));
    cases.push(
        Case::new("bf16", "e4m3", (6, 1000, 2000))
            .epilogue(Epilogue::Quantize)
            .amax(true),
    );
    cases.push(Case::new("bf16", "bf16", (3, 1000, 700)).amax(false));
    for epilogue in [
        Epilogue::AlphaBetaC,
        Epilogue::BiasGelu,
        Epilogue::BiasGeluTanh,
    ] {
        cases.push(Case::new("bf16", "bf16", (4, 1001, 999)).epilogue(epilogue));
        cases.push(
            Case::new("f16", "f16", (999, 6, 1001))
                .epilogue(epilogue)
                .ld_pad(1),
        );
    }
    cases
}

/// Whether a case of the shared matrix suits the tiny kernel, which reloads its operands from L1
/// and L2 for every warp: up to 2^31 multiply-adds (1000x3000x2000 is 6 x 10^9).
pub fn tiny_takes(case: &Case) -> bool {
    let Shape { m, n, k } = case.shape;
    m * n * k <= 1 << 31
}

/// The tiny kernel: every warp tile forced (rows past M and columns past N read the last row
/// and column), K below one warp-wide step, inside one loop turn and over several, every
/// layout at 2-byte skews (ld + 1, odd bases), 4-byte and unscaled fp8 inputs, e4m3 x e5m2, fp8 D
/// with amax per tensor and per row, epilogues.
pub fn tiny() -> Vec<Case> {
    const FORCED: [&str; 5] = [
        "TILE_M == 1; TILE_N == 4; TILE_K == 32;",
        "TILE_M == 4; TILE_N == 16; TILE_K == 128;",
        "TILE_M == 2; TILE_N == 32; TILE_K == 256;",
        "TILE_M == 1; TILE_N == 32; TILE_K == 64;",
        "TILE_M == 4; TILE_N == 8; TILE_K == 32;",
    ];
    let mut cases = Vec::new();
    for constraints in FORCED {
        for shape in [(17, 33, 65), (1, 1, 1), (5, 3, 31), (33, 70, 1000)] {
            cases.push(Case::new("bf16", "bf16", shape).constraints(constraints));
        }
        for layouts in LAYOUTS {
            cases.push(
                Case::new("bf16", "bf16", (127, 129, 255))
                    .layouts(layouts)
                    .ld_pad(1)
                    .base_offset(2)
                    .constraints(constraints),
            );
        }
    }
    for (a, d) in [
        ("f32", "f32"),
        ("tf32", "f32"),
        ("f16", "f16"),
        ("e4m3", "bf16"),
        ("e5m2", "f32"),
    ] {
        cases.push(Case::new(a, d, (17, 33, 65)).ld_pad(1));
        cases.push(Case::new(a, d, (127, 129, 255)).layouts(["col", "row", "col"]));
    }
    cases.push(Case::new("bf16", "f32", (300, 2, 4000)).base_offset(2));
    cases.push(Case::new("e4m3", "bf16", (127, 129, 255)).input_b("e5m2"));
    cases.push(
        Case::new("bf16", "e4m3", (37, 41, 300))
            .epilogue(Epilogue::Quantize)
            .amax(true),
    );
    cases.push(Case::new("bf16", "bf16", (37, 41, 300)).amax(false));
    for epilogue in [
        Epilogue::AlphaBetaC,
        Epilogue::BiasGelu,
        Epilogue::BiasGeluTanh,
    ] {
        cases.push(
            Case::new("bf16", "bf16", (17, 33, 65))
                .layouts(["col", "row", "col"])
                .epilogue(epilogue)
                .ld_pad(1),
        );
    }
    cases
}

/// The sm90 schedules the search may not pick on their own, forced through constraints: ping-pong
/// (two consumers, each on whole 64- or 128-row tiles), one consumer, and no cluster, on ragged
/// shapes in every layout (several tiles per block, so the persistent loop and the consumers'
/// turns are exercised).
pub fn sm90_schedules() -> Vec<Case> {
    const FORCED: [&str; 4] = [
        "WARPGROUPS == 2; TILE_M == 64;",
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 128; CLUSTER_M == 2; registers >= 120;",
        "WARPGROUPS == 1; CLUSTER_M == 1;",
        "WARPGROUPS == 2; TILE_M == 256; CLUSTER_M == 1;",
    ];
    let mut cases = Vec::new();
    for constraints in FORCED {
        for layouts in [["row", "col", "row"], ["col", "row", "col"]] {
            for shape in [(1000, 3000, 2000), (2100, 2100, 130)] {
                cases.push(
                    Case::new("bf16", "bf16", shape)
                        .layouts(layouts)
                        .constraints(constraints),
                );
            }
        }
    }
    cases.push(
        Case::new("f16", "f32", (777, 1555, 300))
            .epilogue(Epilogue::AlphaBetaC)
            .constraints(FORCED[0]),
    );
    // A cluster whose second block's A box lies wholly below M (M <= TILE_M), and ping-pong with
    // K below one tile and exactly one k-tile.
    for m in [1, 64] {
        cases.push(Case::new("bf16", "bf16", (m, 2000, 1000)).constraints("CLUSTER_M == 2;"));
    }
    for k in [7, 64] {
        cases.push(Case::new("bf16", "bf16", (300, 700, k)).constraints(FORCED[0]));
    }
    // D's TMA stores (16-bit D, aligned): boxes clipped at M and N, a tile whose last chunk is
    // narrower than a box (160 = 64 + 64 + 32: stored by the threads), the fp8 deferred epilogue
    // storing the previous tile's pieces inside a k-tile.
    for (n, constraints) in [
        (200, "TILE_M == 128; TILE_N == 160; WARPGROUPS == 2;"),
        (336, "TILE_N == 128; WARPGROUPS == 1;"),
    ] {
        cases.push(Case::new("bf16", "bf16", (300, n, 200)).constraints(constraints));
        cases.push(Case::new("f16", "f16", (130, n, 72)).constraints(constraints));
    }
    cases.push(
        Case::new("e4m3", "bf16", (2100, 2000, 384))
            .scaling(Scaling::Blocks)
            .constraints("TILE_M == 128; TILE_N == 160; WARPGROUPS == 2; CLUSTER_M == 1;"),
    );
    // One staged-epilogue buffer per warp (two do not fit beside the ring at these stages): each
    // TMA-stored piece waits for the last to be read; 144 = 64 + 64 + 16 ends on a narrow chunk
    // stored by the threads from the same buffer.
    for (shape, constraints) in [
        (
            (1000, 3000, 2000),
            "TILE_M == 128; TILE_N == 192; WARPGROUPS == 2; STAGES == 5;",
        ),
        (
            (300, 400, 500),
            "TILE_M == 128; TILE_N == 144; WARPGROUPS == 2; STAGES == 6;",
        ),
    ] {
        cases.push(Case::new("bf16", "bf16", shape).constraints(constraints));
    }
    // D rows that are not 16-byte aligned (ld = N + 1) and end on a 64-column chunk boundary
    // short of the tile (N - n0 = 64 in a 128-wide tile, 192 in a 208-wide one).
    for (n, constraints) in [(192, "TILE_N == 128;"), (400, "TILE_N == 208;")] {
        cases.push(
            Case::new("bf16", "bf16", (300, n, 128))
                .ld_pad(1)
                .constraints(constraints),
        );
    }
    cases
}

/// fp8 on the sm90 kernel (two-level accumulation): every scaling, both formats and the mixed
/// product, aligned and ragged shapes (K below and not a multiple of 128, M = 1, primes), ld = K+1
/// and 1-byte-misaligned bases (repacked), the epilogues, and the schedules.
pub fn fp8() -> Vec<Case> {
    let mut cases = Vec::new();
    for scaling in [
        Scaling::Blocks,
        Scaling::PerTensor,
        Scaling::PerRowAndColumn,
        Scaling::BlocksTransposed,
        Scaling::RowsAndBlocks,
        Scaling::RowBlocksBoth,
        Scaling::None,
    ] {
        for shape in [(256, 512, 1024), (127, 129, 255), (1000, 3000, 2000)] {
            cases.push(Case::new("e4m3", "bf16", shape).scaling(scaling));
        }
    }
    for (a, b) in [("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")] {
        cases.push(
            Case::new(a, "bf16", (300, 700, 640))
                .input_b(b)
                .scaling(Scaling::Blocks),
        );
    }
    for output in ["f16", "f32"] {
        cases.push(Case::new("e4m3", output, (333, 444, 555)).scaling(Scaling::Blocks));
    }
    // fp8 D: both formats, row- and column-major, 129-byte rows (no 16-byte stores), and values
    // scaled past e4m3's 448, which saturate.
    for (output, shape, layouts, epilogue) in [
        (
            "e4m3",
            (1000, 3000, 2000),
            ["row", "col", "row"],
            Epilogue::Plain,
        ),
        (
            "e5m2",
            (1000, 3000, 2000),
            ["row", "col", "row"],
            Epilogue::Plain,
        ),
        (
            "e4m3",
            (1000, 3000, 2000),
            ["row", "col", "row"],
            Epilogue::Quantize,
        ),
        (
            "e4m3",
            (127, 129, 255),
            ["row", "col", "row"],
            Epilogue::Quantize,
        ),
        (
            "e4m3",
            (127, 129, 255),
            ["row", "col", "col"],
            Epilogue::Quantize,
        ),
    ] {
        cases.push(
            Case::new("e4m3", output, shape)
                .scaling(Scaling::PerTensor)
                .layouts(layouts)
                .epilogue(epilogue),
        );
    }
    cases.push(
        Case::new("e4m3", "e4m3", (257, 383, 640))
            .scaling(Scaling::Blocks)
            .epilogue(Epilogue::AlphaBetaC),
    );
    // fp8 D in tiles whose width is an odd multiple of 8: the staged epilogue's last 16-byte
    // piece of a row is half the next tile's.
    for constraints in [
        "TILE_N == 56;",
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 120;",
    ] {
        cases.push(
            Case::new("e4m3", "e4m3", (300, 1000, 512))
                .scaling(Scaling::PerTensor)
                .constraints(constraints),
        );
    }
    // Scales that do not depend on K (and none) on both schedules and one consumer over 7 to 13
    // k-tiles, and a long K into an f32 D, whose error is the two-level sums' own.
    for (scaling, output, shape, constraints) in [
        (
            Scaling::PerTensor,
            "bf16",
            (300, 700, 896),
            "WARPGROUPS == 2; TILE_M == 64;",
        ),
        (
            Scaling::PerTensor,
            "bf16",
            (300, 700, 896),
            "WARPGROUPS == 2; TILE_M == 128;",
        ),
        (
            Scaling::None,
            "bf16",
            (129, 500, 1152),
            "WARPGROUPS == 2; TILE_M == 64;",
        ),
        (
            Scaling::PerRowAndColumn,
            "bf16",
            (200, 264, 1664),
            "WARPGROUPS == 1;",
        ),
        (
            Scaling::PerTensor,
            "f32",
            (256, 384, 16384),
            "WARPGROUPS == 2; TILE_M == 128;",
        ),
        (
            Scaling::Blocks,
            "f32",
            (256, 384, 16384),
            "WARPGROUPS == 2; TILE_M == 128;",
        ),
        // Two m64 slices per consumer (256-row tiles) taking turns with one set of partial sums:
        // A's scales by TMA (M-major, M a multiple of 4) and copied by the producer's lanes
        // (M = 1001, where a TMA box would not start on 16 bytes; row-major); tiles meeting two
        // blocks of B's scales (112 wide); long K into an f32 D; K and N tails.
        (
            Scaling::Blocks,
            "bf16",
            (1000, 1000, 1000),
            "WARPGROUPS == 2; TILE_M == 256; TILE_N == 128;",
        ),
        (
            Scaling::Blocks,
            "bf16",
            (1001, 1000, 1000),
            "WARPGROUPS == 2; TILE_M == 256; TILE_N == 128;",
        ),
        (
            Scaling::BlocksTransposed,
            "bf16",
            (1001, 1000, 1000),
            "WARPGROUPS == 2; TILE_M == 256; TILE_N == 128;",
        ),
        (
            Scaling::Blocks,
            "bf16",
            (515, 700, 896),
            "WARPGROUPS == 2; TILE_M == 256; TILE_N == 112;",
        ),
        (
            Scaling::Blocks,
            "f32",
            (300, 384, 16384),
            "WARPGROUPS == 2; TILE_M == 256;",
        ),
        (
            Scaling::PerTensor,
            "bf16",
            (515, 700, 896),
            "WARPGROUPS == 2; TILE_M == 256; TILE_N == 128;",
        ),
        // Consumers of 64x192 and 64x176 (as many partial sums as sums) with the epilogue
        // deferred into the next tile's first k-tile: 192-wide tiles starting 64 columns into a
        // block of B's scales (they meet two), with A's scales by TMA and by the producer's
        // lanes, one consumer at M = 64, long K into an f32 D; per-tensor 176-wide tiles.
        (
            Scaling::Blocks,
            "bf16",
            (1000, 1000, 1000),
            "WARPGROUPS == 2; TILE_M == 128; TILE_N == 192;",
        ),
        (
            Scaling::BlocksTransposed,
            "bf16",
            (1001, 1000, 1000),
            "WARPGROUPS == 2; TILE_M == 128; TILE_N == 192;",
        ),
        (
            Scaling::Blocks,
            "bf16",
            (64, 1000, 1000),
            "WARPGROUPS == 1; TILE_N == 192;",
        ),
        (
            Scaling::Blocks,
            "f32",
            (300, 400, 16384),
            "WARPGROUPS == 2; TILE_M == 128; TILE_N == 192;",
        ),
        (
            Scaling::PerTensor,
            "bf16",
            (515, 700, 896),
            "WARPGROUPS == 2; TILE_M == 128; TILE_N == 176;",
        ),
    ] {
        cases.push(
            Case::new("e4m3", output, shape)
                .scaling(scaling)
                .constraints(constraints),
        );
    }
    // 256-row tiles into an fp8 D with a per-row amax, column-major (stored from the registers).
    cases.push(
        Case::new("e4m3", "e4m3", (300, 400, 512))
            .scaling(Scaling::PerTensor)
            .layouts(["row", "col", "col"])
            .epilogue(Epilogue::Quantize)
            .amax(true)
            .constraints("WARPGROUPS == 2; TILE_M == 256;"),
    );
    // 192-wide tiles into an fp8 D with a per-row amax, row-major (the staged epilogue, deferred).
    cases.push(
        Case::new("e4m3", "e4m3", (300, 400, 512))
            .scaling(Scaling::Blocks)
            .epilogue(Epilogue::Quantize)
            .amax(true)
            .constraints("WARPGROUPS == 2; TILE_M == 128; TILE_N == 192;"),
    );
    // fp8 D rows of 200 bytes (every other one 8 bytes off 16) where a tile's part of D ends on a
    // 64-column chunk boundary short of the tile (136-wide tiles, N - n0 = 64): the piece the
    // chunk would carry into the next is the row's last.
    cases.push(
        Case::new("e4m3", "e4m3", (300, 200, 256))
            .scaling(Scaling::PerTensor)
            .constraints("TILE_N == 136;"),
    );
    // An amax output 2 bytes off its alignment: repacked, and zeroed where the kernel writes it.
    cases.push(
        Case::new("e4m3", "e4m3", (127, 129, 255))
            .scaling(Scaling::PerTensor)
            .base_offset(2)
            .amax(true),
    );
    // Amax outputs, per tensor and per row: staged and direct epilogues, cooperative and
    // ping-pong, and one problem large enough to be checked on sampled rows.
    for (shape, layouts, per_row) in [
        ((1000, 3000, 2000), ["row", "col", "row"], false),
        ((1000, 3000, 2000), ["row", "col", "row"], true),
        ((127, 129, 255), ["row", "col", "col"], true),
        ((127, 129, 255), ["row", "col", "col"], false),
        ((4096, 7168, 2048), ["row", "col", "row"], true),
    ] {
        cases.push(
            Case::new("e4m3", "e4m3", shape)
                .scaling(Scaling::Blocks)
                .layouts(layouts)
                .epilogue(Epilogue::Quantize)
                .amax(per_row),
        );
    }
    for shape in [
        (1, 1, 1),
        (1, 7168, 2048),
        (17, 33, 65),
        (64, 2112, 7168),
        (4096, 7168, 2048),
    ] {
        cases.push(Case::new("e4m3", "bf16", shape).scaling(Scaling::Blocks));
    }
    cases.push(
        Case::new("e4m3", "bf16", (4095, 4097, 4093))
            .scaling(Scaling::Blocks)
            .ld_pad(1),
    );
    cases.push(
        Case::new("e4m3", "bf16", (127, 129, 255))
            .scaling(Scaling::Blocks)
            .base_offset(1),
    );
    // fp8 declared M-major (A col) and/or N-major (B row): the launcher transposes them into
    // K-major workspaces (the kernel reads fp8 K-major only); with scales of every kind, ragged
    // shapes, ld + 1 and 1-byte offsets (transposed and repacked operands in one launch).
    for (layouts, scaling, shape) in [
        (["col", "row", "row"], Scaling::Blocks, (256, 512, 1024)),
        (["col", "row", "row"], Scaling::PerTensor, (127, 129, 255)),
        (["col", "col", "row"], Scaling::Blocks, (1000, 3000, 2000)),
        (
            ["row", "row", "col"],
            Scaling::PerRowAndColumn,
            (300, 700, 640),
        ),
        (
            ["col", "row", "row"],
            Scaling::RowBlocksBoth,
            (129, 1003, 384),
        ),
        (["col", "row", "row"], Scaling::None, (1, 8, 32)),
    ] {
        cases.push(
            Case::new("e4m3", "bf16", shape)
                .scaling(scaling)
                .layouts(layouts),
        );
    }
    cases.push(
        Case::new("e4m3", "bf16", (333, 444, 555))
            .scaling(Scaling::Blocks)
            .layouts(["col", "row", "row"])
            .ld_pad(1),
    );
    cases.push(
        Case::new("e4m3", "bf16", (127, 129, 255))
            .scaling(Scaling::PerTensor)
            .layouts(["col", "row", "row"])
            .base_offset(1),
    );
    // Per-tensor scales (read once, first thing) repacked with A and B: the GEMM is a dependent
    // launch behind a copy of 33 MB.
    cases.push(
        Case::new("e4m3", "bf16", (4095, 4097, 4093))
            .scaling(Scaling::PerTensor)
            .base_offset(1),
    );
    cases.push(
        Case::new("e4m3", "f32", (127, 129, 255))
            .scaling(Scaling::PerTensor)
            .layouts(["row", "col", "col"]),
    );
    for epilogue in [Epilogue::AlphaBetaC, Epilogue::BiasGeluTanh] {
        cases.push(
            Case::new("e4m3", "bf16", (257, 383, 640))
                .scaling(Scaling::Blocks)
                .epilogue(epilogue),
        );
    }
    for constraints in [
        "WARPGROUPS == 2; TILE_M == 64;",
        "WARPGROUPS == 1; CLUSTER_M == 1;",
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 112;",
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 64; CLUSTER_M == 2;",
        // Tiles that meet two blocks of B's 128-column scales at varying offsets.
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 160;",
        "WARPGROUPS == 2; TILE_M == 128; TILE_N == 144; CLUSTER_M == 1;",
    ] {
        cases.push(
            Case::new("e4m3", "bf16", (1000, 3000, 2000))
                .scaling(Scaling::Blocks)
                .constraints(constraints),
        );
    }
    // 8-wide tiles with a scale per column of B (N = 8, and N = 1 in a tile of 8), a 256-row
    // cooperative tile (two m64 slices per consumer), a split step of 1 (136), row-major A
    // scales on a 160-wide tile, and fewer k-tiles than stages (K = 384: the ring never wraps).
    for (shape, scaling, constraints) in [
        ((300, 8, 1024), Scaling::RowBlocksBoth, "TILE_N == 8;"),
        ((300, 1, 1024), Scaling::RowBlocksBoth, "TILE_N == 8;"),
        (
            (1000, 3000, 2000),
            Scaling::Blocks,
            "TILE_M == 256; TILE_N == 80;",
        ),
        (
            (1000, 3000, 2000),
            Scaling::Blocks,
            "WARPGROUPS == 2; TILE_M == 128; TILE_N == 136;",
        ),
        (
            (1000, 3000, 2000),
            Scaling::BlocksTransposed,
            "TILE_N == 160;",
        ),
        ((1000, 3000, 384), Scaling::Blocks, "TILE_N == 160;"),
    ] {
        cases.push(
            Case::new("e4m3", "bf16", shape)
                .scaling(scaling)
                .constraints(constraints),
        );
    }
    // M not a multiple of 4: A's scale columns are 16-byte aligned only every fourth k-block, so
    // the staged copies switch between 16-byte and 4-byte pieces.
    cases.push(
        Case::new("e4m3", "bf16", (1001, 1500, 1024))
            .scaling(Scaling::Blocks)
            .constraints("TILE_N == 160;"),
    );
    cases
}
