//! The CPU reference that every generated kernel is checked against (docs/cli.md, "Checking").
//!
//! [`Problem::generate`] makes fresh, seeded, non-zero inputs for a spec and a shape, already
//! encoded in each operand's dtype and memory layout (what gets uploaded), plus an output buffer
//! poisoned with NaN so elements a kernel never writes are caught. [`Problem::check`] recomputes
//! the GEMM in f64 over the rounded (and, for FP8, dequantized) inputs, applies the spec's
//! epilogue, and reports ‖D − ref‖ / ‖ref‖ against the tolerance of the spec's dtypes.
//!
//! Large problems (more than [`FULL_REFERENCE_MACS`] multiply-adds) are checked on a fresh random
//! sample of whole rows and whole columns, always including the first and last of each, while
//! every output element is still checked for poison.

use crate::codec::{
    decode, encode_into, fp8_max_finite, fp8_ulp, is_poison, poison_byte, round_to,
};
use crate::dtype::DType;
use crate::plan::Shape;
use crate::spec::{Dim, Direction, Expr, KernelSpec, Layout, Role, ShapeSym};
use rayon::prelude::*;
use thiserror::Error;

/// Above this many multiply-adds (M·N·K) the reference is computed on sampled rows and columns.
pub const FULL_REFERENCE_MACS: u64 = 1 << 33;
/// Rows (and columns) in the sample of a large problem, the first and last included.
pub const SAMPLED_LINES: u64 = 64;

#[derive(Debug, Error, PartialEq)]
pub enum ReferenceError {
    #[error("kernel `{kernel}` has no operand with role {role}")]
    MissingOperand { kernel: String, role: &'static str },
    #[error("operand `{operand}` has {dims} dims; the reference handles 0, 1 or 2")]
    UnsupportedRank { operand: String, dims: usize },
    #[error("the epilogue names `{name}`, which is neither a param nor an input of the kernel")]
    UnknownVariable { name: String },
    #[error("`{name}` is an operand of role {role}, which an epilogue cannot read")]
    UnreadableVariable { name: String, role: String },
    #[error("the output has {got} bytes; {expected} were expected for {operand}")]
    OutputSize {
        operand: String,
        expected: usize,
        got: usize,
    },
    #[error("shape {shape} has a zero extent")]
    EmptyShape { shape: Shape },
    #[error("operand `{operand}` needs {bytes} bytes, more than this machine can address")]
    TooLarge { operand: String, bytes: u128 },
    #[error("kernel `{kernel}` {}", if *declared { "has an amax output: check it with its bytes (check_outputs)" } else { "has no amax output, but amax bytes were given" })]
    AmaxBytes { kernel: String, declared: bool },
}

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------

/// Where the elements of an operand live: logical `rows x cols` (vectors are one row, scalars
/// 1x1), stored `row`- or `col`-major with leading dimension `ld` (in elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub rows: u64,
    pub cols: u64,
    pub layout: Layout,
    pub ld: u64,
}

impl Geometry {
    /// Element offset of (r, c).
    pub fn offset(&self, r: u64, c: u64) -> u64 {
        match self.layout {
            Layout::Row => r * self.ld + c,
            Layout::Col => c * self.ld + r,
        }
    }

    /// Contiguous elements per row (`row`) or column (`col`).
    pub fn inner(&self) -> u64 {
        match self.layout {
            Layout::Row => self.cols,
            Layout::Col => self.rows,
        }
    }

    /// Number of rows (`row`) or columns (`col`), each `ld` elements apart.
    pub fn outer(&self) -> u64 {
        match self.layout {
            Layout::Row => self.rows,
            Layout::Col => self.cols,
        }
    }

    /// Elements from the first to one past the last, padding between lines included.
    pub fn storage_elems(&self) -> u64 {
        if self.rows == 0 || self.cols == 0 {
            return 0;
        }
        (self.outer() - 1) * self.ld + self.inner()
    }
}

/// One operand on the host: encoded bytes in memory order, ready to upload.
#[derive(Debug, Clone)]
pub struct HostTensor {
    pub name: String,
    pub role: Role,
    pub dtype: DType,
    pub geometry: Geometry,
    /// `geometry.storage_elems() * dtype.size_bytes()` bytes. Padding between lines holds poison,
    /// so a kernel that reads it produces NaN.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// Whether this is a matrix operand (A, B, C, D), whose leading dimension is a kernel argument.
    pub fn is_matrix(&self) -> bool {
        matches!(self.role, Role::A | Role::B | Role::C | Role::D)
    }

    fn element(&self, r: u64, c: u64) -> f64 {
        let size = self.dtype.size_bytes() as usize;
        let at = self.geometry.offset(r, c) as usize * size;
        decode(self.dtype, &self.bytes[at..at + size])
    }
}

fn extent(shape: Shape, sym: ShapeSym) -> u64 {
    match sym {
        ShapeSym::M => shape.m,
        ShapeSym::N => shape.n,
        ShapeSym::K => shape.k,
    }
}

fn dim_value(shape: Shape, dim: &Dim) -> u64 {
    match dim {
        Dim::Sym(s) => extent(shape, *s),
        Dim::Lit(v) => *v,
        Dim::CeilDiv(s, b) => extent(shape, *s).div_ceil(*b),
    }
}

/// Where `operand` lives at `shape`: matrices in their declared layout with `ld_pad` extra
/// elements per leading dimension, vectors as one row, scalars as 1x1.
pub fn operand_geometry(
    operand: &crate::spec::Operand,
    shape: Shape,
    ld_pad: u64,
) -> Result<Geometry, ReferenceError> {
    // No allocation: the runtime calls this on every operand of every launch.
    let value = |d| dim_value(shape, d);
    let is_matrix = matches!(operand.role, Role::A | Role::B | Role::C | Role::D);
    let (rows, cols, layout) = match operand.dims.as_slice() {
        [] => (1, 1, Layout::Row),
        [len] => (1, value(len), Layout::Row),
        [rows, cols] => (value(rows), value(cols), operand.layout),
        dims => {
            return Err(ReferenceError::UnsupportedRank {
                operand: operand.name.clone(),
                dims: dims.len(),
            })
        }
    };
    let natural = match layout {
        Layout::Row => cols,
        Layout::Col => rows,
    };
    Ok(Geometry {
        rows,
        cols,
        layout,
        ld: natural + if is_matrix { ld_pad } else { 0 },
    })
}

// ---------------------------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------------------------

/// SplitMix64: tiny, fast, and good enough for test data; seeded per chunk so generation is
/// parallel and still deterministic.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * unit
    }

    /// Uniform in 0..n.
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

fn mix(a: u64, b: u64) -> u64 {
    SplitMix64::new(a ^ b.wrapping_mul(0xd6e8_feb8_6659_fd93)).next_u64()
}

/// How an operand's elements are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Distribution {
    /// Uniform in (lo, hi), then rounded to the dtype: data in (-1, 1).
    Uniform(f64, f64),
    /// Integers in [-8, 8].
    SmallIntegers,
    /// An FP8 operand that has a scale: uniform over the whole finite range (-max, max) of its
    /// format, as a tensor quantized by its absolute maximum is: the codes reach the largest
    /// exponents, which (-1, 1) never would.
    Fp8Codes { max: f64 },
    /// The scale of such an operand: `2^u / max` with u uniform in (-2, 2), positive and
    /// varying 16-fold between blocks, so the dequantized values are O(1) (as the unscaled
    /// data's are) and a scale applied to the wrong block is visible in the error.
    Fp8Scale { max: f64 },
}

/// FP8 scales without a dtype to size them by (a scale of a non-FP8 operand, which sema
/// refuses): [0.5, 2), the range scales had before they followed the FP8 format.
const PLAIN_SCALE: Distribution = Distribution::Uniform(0.5, 2.0);

/// The distribution of `operand`'s elements in `spec`.
fn distribution(spec: &KernelSpec, operand: &crate::spec::Operand) -> Distribution {
    let fp8_max = |name: &str| spec.operand(name).and_then(|o| fp8_max_finite(o.dtype));
    match &operand.role {
        Role::Scale { of, .. } => match fp8_max(of) {
            Some(max) => Distribution::Fp8Scale { max },
            None => PLAIN_SCALE,
        },
        _ if matches!(operand.dtype, DType::I8 | DType::I32) => Distribution::SmallIntegers,
        Role::A | Role::B => {
            let scaled = spec
                .operands
                .iter()
                .any(|o| matches!(&o.role, Role::Scale { of, .. } if *of == operand.name));
            match fp8_max_finite(operand.dtype) {
                Some(max) if scaled => Distribution::Fp8Codes { max },
                _ => Distribution::Uniform(-1.0, 1.0),
            }
        }
        _ => Distribution::Uniform(-1.0, 1.0),
    }
}

fn sample_value(rng: &mut SplitMix64, distribution: Distribution) -> f64 {
    match distribution {
        Distribution::Uniform(lo, hi) => rng.uniform(lo, hi),
        Distribution::SmallIntegers => rng.below(17) as f64 - 8.0,
        Distribution::Fp8Codes { max } => rng.uniform(-max, max),
        Distribution::Fp8Scale { max } => rng.uniform(-2.0, 2.0).exp2() / max,
    }
}

/// Elements generated per independently seeded chunk.
const GENERATION_CHUNK: u64 = 1 << 16;

fn generate_bytes(
    dtype: DType,
    distribution: Distribution,
    geometry: Geometry,
    seed: u64,
) -> Vec<u8> {
    let size = dtype.size_bytes() as usize;
    let mut bytes = vec![poison_byte(dtype); geometry.storage_elems() as usize * size];
    let line_bytes = geometry.ld as usize * size;
    let inner_bytes = geometry.inner() as usize * size;
    if line_bytes == 0 || inner_bytes == 0 {
        return bytes;
    }
    let lines_per_chunk = (GENERATION_CHUNK / geometry.inner().max(1)).max(1) as usize;
    let chunks = bytes.par_chunks_mut(line_bytes * lines_per_chunk);
    chunks.enumerate().for_each(|(chunk_index, chunk)| {
        let mut rng = SplitMix64::new(mix(seed, chunk_index as u64));
        for line in chunk.chunks_mut(line_bytes) {
            for element in line[..inner_bytes].chunks_exact_mut(size) {
                encode_into(dtype, sample_value(&mut rng, distribution), element);
            }
        }
    });
    bytes
}

// ---------------------------------------------------------------------------------------------
// Problems
// ---------------------------------------------------------------------------------------------

/// How to lay out and fill a problem's operands.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProblemOptions {
    /// Seeds the inputs and the sample of checked rows/columns. Use a fresh one per check.
    pub seed: u64,
    /// Extra elements added to every matrix operand's leading dimension (1 gives ld = K+1 for a
    /// row-major A).
    pub ld_pad: u64,
    /// Values of the spec's params; params not listed take their default, or a seeded random
    /// value in [0.5, 1.5) when they have none.
    pub params: Vec<(String, f64)>,
}

/// Inputs and an output buffer for one run of a kernel.
#[derive(Debug, Clone)]
pub struct Problem {
    pub shape: Shape,
    /// Every operand, in the spec's declaration order; the output's bytes are poison.
    pub tensors: Vec<HostTensor>,
    /// The value of every param of the spec, in declaration order.
    pub params: Vec<(String, f64)>,
    seed: u64,
    /// Problems above this many multiply-adds are checked on sampled lines.
    full_reference_macs: u64,
}

impl Problem {
    /// Fresh inputs for `spec` at `shape`: each element is drawn, rounded to its operand's dtype
    /// and stored in the operand's layout; the output is all poison.
    pub fn generate(
        spec: &KernelSpec,
        shape: Shape,
        options: &ProblemOptions,
    ) -> Result<Problem, ReferenceError> {
        if shape.m == 0 || shape.n == 0 || shape.k == 0 {
            return Err(ReferenceError::EmptyShape { shape });
        }
        let mut tensors = Vec::with_capacity(spec.operands.len());
        for (index, operand) in spec.operands.iter().enumerate() {
            let geometry = operand_geometry(operand, shape, options.ld_pad)?;
            let bytes = geometry.storage_elems() as u128 * operand.dtype.size_bytes() as u128;
            if bytes > isize::MAX as u128 {
                return Err(ReferenceError::TooLarge {
                    operand: operand.name.clone(),
                    bytes,
                });
            }
            let bytes = if operand.direction == Direction::Output {
                vec![poison_byte(operand.dtype); bytes as usize]
            } else {
                let seed = mix(options.seed, index as u64 + 1);
                generate_bytes(operand.dtype, distribution(spec, operand), geometry, seed)
            };
            tensors.push(HostTensor {
                name: operand.name.clone(),
                role: operand.role.clone(),
                dtype: operand.dtype,
                geometry,
                bytes,
            });
        }
        let mut rng = SplitMix64::new(mix(options.seed, 0));
        let params = spec
            .params
            .iter()
            .map(|p| {
                let random = rng.uniform(0.5, 1.5);
                let given = options.params.iter().find(|(name, _)| name == &p.name);
                let value = given.map(|(_, v)| *v).or(p.default).unwrap_or(random);
                (p.name.clone(), value)
            })
            .collect();
        Ok(Problem {
            shape,
            tensors,
            params,
            seed: options.seed,
            full_reference_macs: FULL_REFERENCE_MACS,
        })
    }

    pub fn tensor(&self, name: &str) -> Option<&HostTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    fn by_role(&self, spec: &KernelSpec, role: Role) -> Result<&HostTensor, ReferenceError> {
        let label = match role {
            Role::A => "A",
            Role::B => "B",
            _ => "D",
        };
        self.tensors
            .iter()
            .find(|t| t.role == role)
            .ok_or(ReferenceError::MissingOperand {
                kernel: spec.name.clone(),
                role: label,
            })
    }

    /// The output operand (its bytes are the poison that is uploaded before a run).
    pub fn output(&self) -> Option<&HostTensor> {
        self.tensors.iter().find(|t| t.role == Role::D)
    }

    /// The amax output, if the spec declares one.
    pub fn amax_output(&self) -> Option<&HostTensor> {
        self.tensors
            .iter()
            .find(|t| matches!(t.role, Role::Amax { .. }))
    }

    /// Compares `output` (the bytes of D downloaded after the run, in D's layout) with the f64
    /// reference; a spec with an amax output needs [`Problem::check_outputs`].
    pub fn check(&self, spec: &KernelSpec, output: &[u8]) -> Result<Check, ReferenceError> {
        self.check_outputs(spec, output, None)
    }

    /// [`Problem::check`], and the amax output's bytes (`amax`) against the largest |value| of
    /// the reference's epilogue (before D's rounding), over D or per row. A problem checked on
    /// sampled lines checks a per-row amax on the sampled rows and a tensor's amax from below
    /// (it must reach the sampled elements' maximum).
    pub fn check_outputs(
        &self,
        spec: &KernelSpec,
        output: &[u8],
        amax: Option<&[u8]>,
    ) -> Result<Check, ReferenceError> {
        let amax_tensor = self.amax_output();
        if amax_tensor.is_some() != amax.is_some() {
            return Err(ReferenceError::AmaxBytes {
                kernel: spec.name.clone(),
                declared: amax_tensor.is_some(),
            });
        }
        let d = self.by_role(spec, Role::D)?;
        if output.len() != d.bytes.len() {
            return Err(ReferenceError::OutputSize {
                operand: d.name.clone(),
                expected: d.bytes.len(),
                got: output.len(),
            });
        }
        let a = self.dequantized(spec, self.by_role(spec, Role::A)?, Operand::A)?;
        let b = self.dequantized(spec, self.by_role(spec, Role::B)?, Operand::B)?;
        let epilogue = CompiledEpilogue::new(spec, self)?;
        let output = HostTensor {
            bytes: output.to_vec(),
            ..d.clone()
        };
        let unwritten = count_poison(&output);
        let fp8_max = fp8_max_finite(d.dtype);

        let Shape { m, n, k } = self.shape;
        let sampled = m.saturating_mul(n).saturating_mul(k) > self.full_reference_macs;
        let per_row_amax = matches!(
            amax_tensor.map(|t| &t.role),
            Some(Role::Amax { per_row: true, .. })
        );
        let lines = if sampled {
            let mut rng = SplitMix64::new(mix(self.seed, u64::MAX));
            let rows = sample_lines(m, &mut rng);
            let cols = sample_lines(n, &mut rng);
            let mut lines: Vec<Line> = rows.into_iter().map(Line::Row).collect();
            lines.extend(cols.into_iter().map(Line::Col));
            lines
        } else {
            (0..m).map(Line::Row).collect()
        };
        // Collected in line order and added up in that order: the error is the same on every run.
        let sums: Vec<ErrorSums> = lines
            .par_iter()
            .map(|line| {
                let mut sums = ErrorSums::default();
                let mut line_max = 0.0f64;
                let cells: Vec<(u64, u64)> = match *line {
                    Line::Row(r) => (0..n).map(|c| (r, c)).collect(),
                    Line::Col(c) => (0..m).map(|r| (r, c)).collect(),
                };
                for (r, c) in cells {
                    let acc = dot(a.row(r), b.row(c));
                    let expected = epilogue.eval(r, c, acc);
                    if !expected.is_nan() {
                        line_max = line_max.max(expected.abs());
                    }
                    let got = output.element(r, c);
                    if got.is_nan() {
                        continue; // counted as unwritten
                    }
                    // An fp8 D saturates: the reference is the value it stores (rounded and
                    // saturated), and each element is held to one ulp of the unrounded value.
                    let stored = match fp8_max {
                        Some(max) => {
                            let saturated = expected.clamp(-max, max);
                            if let Some(ulp) = fp8_ulp(d.dtype, saturated) {
                                let excess = (got - saturated).abs() - ulp;
                                sums.worst_excess = sums.worst_excess.max(excess);
                            }
                            round_to(d.dtype, expected)
                        }
                        None => expected,
                    };
                    sums.diff += (got - stored) * (got - stored);
                    sums.reference += stored * stored;
                    sums.count += 1;
                }
                sums.amax = line_max;
                if let (&Line::Row(r), true) = (line, per_row_amax) {
                    sums.amax_rows.push((r, line_max));
                }
                sums
            })
            .collect();
        let total = sums.into_iter().fold(ErrorSums::default(), ErrorSums::add);
        let error = if total.reference > 0.0 {
            (total.diff / total.reference).sqrt()
        } else {
            total.diff.sqrt()
        };
        let amax = match (amax_tensor, amax) {
            (Some(tensor), Some(bytes)) => Some(check_amax(
                tensor,
                bytes,
                &total,
                sampled.then_some(&output),
                (input_tolerance(spec) / 10.0).max(1e-5),
            )),
            _ => None,
        };
        let tolerance = tolerance(spec);
        // An fp8 D is also held to each element: within one of its ulps of the reference (the
        // kernel's f32 sum may land on the other side of a rounding boundary), plus the error the
        // sums themselves may carry, the inputs' tolerance times the reference's rms, where that
        // is coarser: near zero an fp8's spacing (2^-9 for e4m3, 2^-16 for e5m2) is finer than
        // an f32 sum of thousands of products, let alone fp8 wgmma's in-tile sums.
        let fp8 = fp8_max.map(|_| {
            let rms = (total.reference / total.count.max(1) as f64).sqrt();
            Fp8Check {
                worst_excess: total.worst_excess.max(0.0),
                allowed_excess: input_tolerance(spec) * rms,
            }
        });
        Ok(Check {
            error,
            tolerance,
            passed: unwritten == 0
                && error.is_finite()
                && error < tolerance
                && fp8.is_none_or(|f| f.worst_excess <= f.allowed_excess)
                && amax.is_none_or(|a| a.passed()),
            fp8,
            amax,
            unwritten,
            checked: total.count,
            sampled,
        })
    }

    /// The reference's output as the bytes of D in its layout: every element computed in f64,
    /// the epilogue applied and the value stored as a kernel stores it ([`encode_into`]), the
    /// padding left poisoned. Where the GEMM is exact in f32 (inputs chosen so), a correct
    /// kernel writes exactly these bytes. Computes every element: meant for small problems.
    pub fn expected_output(&self, spec: &KernelSpec) -> Result<Vec<u8>, ReferenceError> {
        let d = self.by_role(spec, Role::D)?;
        let a = self.dequantized(spec, self.by_role(spec, Role::A)?, Operand::A)?;
        let b = self.dequantized(spec, self.by_role(spec, Role::B)?, Operand::B)?;
        let epilogue = CompiledEpilogue::new(spec, self)?;
        let size = d.dtype.size_bytes() as usize;
        let mut out = d.bytes.clone();
        for r in 0..self.shape.m {
            for c in 0..self.shape.n {
                let value = epilogue.eval(r, c, dot(a.row(r), b.row(c)));
                let at = d.geometry.offset(r, c) as usize * size;
                encode_into(d.dtype, value, &mut out[at..at + size]);
            }
        }
        Ok(out)
    }

    /// The A operand as [M][K] or B as [N][K] (both K-contiguous), dequantized by their scales.
    fn dequantized(
        &self,
        spec: &KernelSpec,
        tensor: &HostTensor,
        which: Operand,
    ) -> Result<DenseRows, ReferenceError> {
        let Shape { m, n, k } = self.shape;
        let outer = match which {
            Operand::A => m,
            Operand::B => n,
        };
        let scales: Vec<&HostTensor> = self
            .tensors
            .iter()
            .filter(|t| matches!(&t.role, Role::Scale { of, .. } if *of == tensor.name))
            .collect();
        let scale_dims: Vec<Vec<Dim>> = scales
            .iter()
            .map(|s| {
                spec.operand(&s.name)
                    .map(|o| o.dims.clone())
                    .unwrap_or_default()
            })
            .collect();
        let mut values = vec![0f32; (outer * k) as usize];
        let rows = values.par_chunks_mut(k.max(1) as usize);
        rows.enumerate().for_each(|(index, row)| {
            let o = index as u64;
            for (kk, slot) in row.iter_mut().enumerate() {
                let kk = kk as u64;
                // (m, k) for A; B is [K, N], so (k, n).
                let (r, c, at) = match which {
                    Operand::A => (o, kk, Shape::new(o, 0, kk)),
                    Operand::B => (kk, o, Shape::new(0, o, kk)),
                };
                let mut value = tensor.element(r, c);
                for (scale, dims) in scales.iter().zip(&scale_dims) {
                    value *= scale_at(scale, dims, at);
                }
                *slot = value as f32;
            }
        });
        Ok(DenseRows { values, len: k })
    }
}

#[derive(Clone, Copy)]
enum Operand {
    A,
    B,
}

/// The scale that applies to the element at `at` (the coordinates of the element along M, N, K):
/// each of the scale tensor's dims picks the element's coordinate along its symbol, divided by
/// the block size for `K/128`-style dims.
fn scale_at(scale: &HostTensor, dims: &[Dim], at: Shape) -> f64 {
    let index = |dim: &Dim| match dim {
        Dim::Sym(s) => extent(at, *s),
        Dim::CeilDiv(s, block) => extent(at, *s) / block,
        Dim::Lit(_) => 0,
    };
    match dims {
        [] => scale.element(0, 0),
        [only] => scale.element(0, index(only)),
        [first, second, ..] => scale.element(index(first), index(second)),
    }
}

/// `count` values of f32 per row, rows back to back.
struct DenseRows {
    values: Vec<f32>,
    len: u64,
}

impl DenseRows {
    fn row(&self, r: u64) -> &[f32] {
        let start = (r * self.len) as usize;
        &self.values[start..start + self.len as usize]
    }
}

/// f64 dot product with independent partial sums (so the compiler can vectorize it).
fn dot(a: &[f32], b: &[f32]) -> f64 {
    let mut partial = [0f64; 8];
    let chunks = a.len() / 8 * 8;
    for (x, y) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            partial[i] += x[i] as f64 * y[i] as f64;
        }
    }
    let tail: f64 = a[chunks..]
        .iter()
        .zip(&b[chunks..])
        .map(|(x, y)| *x as f64 * *y as f64)
        .sum();
    partial.iter().sum::<f64>() + tail
}

enum Line {
    Row(u64),
    Col(u64),
}

/// Up to [`SAMPLED_LINES`] distinct indices in 0..count: the first, the last, and random others.
fn sample_lines(count: u64, rng: &mut SplitMix64) -> Vec<u64> {
    if count <= SAMPLED_LINES {
        return (0..count).collect();
    }
    let mut chosen = vec![0, count - 1];
    while (chosen.len() as u64) < SAMPLED_LINES {
        let candidate = rng.below(count);
        if !chosen.contains(&candidate) {
            chosen.push(candidate);
        }
    }
    chosen.sort_unstable();
    chosen
}

fn count_poison(tensor: &HostTensor) -> u64 {
    let size = tensor.dtype.size_bytes() as usize;
    let g = tensor.geometry;
    (0..g.outer())
        .into_par_iter()
        .map(|line| {
            let start = (line * g.ld) as usize * size;
            let end = start + g.inner() as usize * size;
            tensor.bytes[start..end]
                .chunks_exact(size)
                .filter(|e| is_poison(tensor.dtype, e))
                .count() as u64
        })
        .sum()
}

#[derive(Default, Clone)]
struct ErrorSums {
    diff: f64,
    reference: f64,
    count: u64,
    /// fp8 D: the largest |D - ref| beyond one of D's ulps at ref (ref saturated first).
    worst_excess: f64,
    /// The largest |ref| (before D's rounding; NaN ignored).
    amax: f64,
    /// Per-row amax: the largest |ref| of each checked row.
    amax_rows: Vec<(u64, f64)>,
}

impl ErrorSums {
    fn add(mut self, other: ErrorSums) -> ErrorSums {
        // Appended in place: a fold over M rows must not copy the rows seen so far each time.
        self.amax_rows.extend(other.amax_rows);
        ErrorSums {
            diff: self.diff + other.diff,
            reference: self.reference + other.reference,
            count: self.count + other.count,
            worst_excess: self.worst_excess.max(other.worst_excess),
            amax: self.amax.max(other.amax),
            amax_rows: self.amax_rows,
        }
    }
}

/// The outcome of comparing one run's output with the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    /// ‖D − ref‖ / ‖ref‖ over the checked elements that were written.
    pub error: f64,
    pub tolerance: f64,
    /// No element unwritten (or NaN) and the error below the tolerance.
    pub passed: bool,
    /// Output elements still holding poison (never written, or computed as NaN).
    pub unwritten: u64,
    /// Elements compared with the reference.
    pub checked: u64,
    /// Whether the reference covered sampled rows and columns instead of every element.
    pub sampled: bool,
    /// fp8 D: how far the worst element lies beyond one ulp of the reference.
    pub fp8: Option<Fp8Check>,
    /// The amax output, when the spec has one.
    pub amax: Option<AmaxCheck>,
}

/// The check of an amax output.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AmaxCheck {
    /// The largest relative difference of a checked amax value from the reference's.
    pub error: f64,
    pub tolerance: f64,
    /// Values compared (1 per tensor, one per checked row).
    pub checked: u64,
}

impl AmaxCheck {
    pub fn passed(&self) -> bool {
        self.error.is_finite() && self.error <= self.tolerance
    }
}

/// The largest |element| of a downloaded D that is not NaN, whether it is the dtype's largest
/// finite value (an fp8 D that saturated, whose amax may lie anywhere above) and D's relative
/// rounding.
fn largest_stored(d: &HostTensor) -> (f64, bool, f64) {
    let mut largest = 0.0f64;
    for r in 0..d.geometry.rows {
        for c in 0..d.geometry.cols {
            let v = d.element(r, c);
            if !v.is_nan() {
                largest = largest.max(v.abs());
            }
        }
    }
    (
        largest,
        fp8_max_finite(d.dtype) == Some(largest),
        relative_ulp(d.dtype),
    )
}

/// The relative spacing of a dtype's values (2^-mantissa bits).
fn relative_ulp(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2f64.powi(-23),
        DType::Tf32 => 2f64.powi(-10),
        DType::F16 => 2f64.powi(-10),
        DType::Bf16 => 2f64.powi(-7),
        DType::E4m3 => 2f64.powi(-3),
        DType::E5m2 => 2f64.powi(-2),
        DType::I8 | DType::I32 => 0.0,
    }
}

/// The amax output's bytes against the reference's maxima (see [`Problem::check_outputs`]).
/// `sampled_d`: the whole downloaded D when only sampled lines were computed; its largest element
/// ([`largest_stored`]) bounds a tensor's amax from above.
fn check_amax(
    tensor: &HostTensor,
    bytes: &[u8],
    total: &ErrorSums,
    sampled_d: Option<&HostTensor>,
    tolerance: f64,
) -> AmaxCheck {
    let value = |i: u64| -> f64 {
        let at = i as usize * 4;
        bytes
            .get(at..at + 4)
            .map_or(f64::NAN, |b| decode(DType::F32, b))
    };
    // An f32 amax holds the f64 maximum rounded to f32: inf where it exceeds f32's range.
    let relative = |got: f64, want: f64| {
        let want_f32 = want as f32 as f64;
        if got.is_nan() {
            f64::INFINITY
        } else if got.is_infinite() || want_f32.is_infinite() {
            if got == want_f32 {
                0.0
            } else {
                f64::INFINITY
            }
        } else if want == 0.0 {
            got.abs()
        } else {
            (got - want).abs() / want
        }
    };
    let per_row = matches!(tensor.role, Role::Amax { per_row: true, .. });
    let (error, checked) = if per_row {
        let error = total
            .amax_rows
            .iter()
            .map(|&(r, want)| relative(value(r), want))
            .fold(0.0, f64::max);
        (error, total.amax_rows.len() as u64)
    } else if let Some(d) = sampled_d {
        let (largest, saturated, rel_ulp) = largest_stored(d);
        // From below: it reaches the sampled elements' maximum; from above (unless D saturated):
        // it is within D's rounding of D's largest element.
        let got = value(0);
        let short = (total.amax - got).max(0.0);
        let d_rounding = largest * (1.0 + rel_ulp);
        let over = if saturated {
            0.0
        } else {
            (got - d_rounding).max(0.0)
        };
        let error = if got.is_nan() {
            f64::INFINITY
        } else {
            (short + over) / total.amax.max(f64::MIN_POSITIVE)
        };
        (error, 1)
    } else {
        (relative(value(0), total.amax), 1)
    };
    AmaxCheck {
        error,
        tolerance,
        checked,
    }
}

/// The per-element check of an fp8 D.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Fp8Check {
    /// The largest |D - ref| minus one of D's ulps at ref (0 when every element is within one).
    pub worst_excess: f64,
    /// What it may be: the inputs' tolerance times the reference's rms (the sums' own error).
    pub allowed_excess: f64,
}

/// The relative-error threshold (docs/cli.md, "Checking") for the spec's input dtypes, loosened
/// to the rounding of its output dtype when that is coarser.
pub fn tolerance(spec: &KernelSpec) -> f64 {
    // An FP8 output keeps 2-3 mantissa bits: its rounding alone is a few percent.
    let output = |dtype: DType| match dtype {
        DType::F16 | DType::Bf16 => 1e-2,
        DType::E4m3 | DType::E5m2 => 6e-2,
        _ => 0.0,
    };
    spec.operands
        .iter()
        .filter(|o| o.role == Role::D)
        .map(|o| output(o.dtype))
        .fold(input_tolerance(spec), f64::max)
}

/// The relative-error threshold of the spec's A and B dtypes alone.
fn input_tolerance(spec: &KernelSpec) -> f64 {
    let input = |dtype: DType| match dtype {
        DType::F32 => 1e-5,
        DType::Tf32 => 1e-3,
        DType::F16 | DType::Bf16 | DType::E4m3 | DType::E5m2 => 1e-2,
        DType::I8 | DType::I32 => 1e-9,
    };
    spec.operands
        .iter()
        .filter(|o| matches!(o.role, Role::A | Role::B))
        .map(|o| input(o.dtype))
        .fold(0.0, f64::max)
}

// ---------------------------------------------------------------------------------------------
// Epilogue
// ---------------------------------------------------------------------------------------------

/// The epilogue with every name it reads resolved to where its value comes from; the expression
/// itself is evaluated by [`Expr::eval`], the one definition of what it means.
struct CompiledEpilogue<'a> {
    expr: &'a Expr,
    names: Vec<(String, Source<'a>)>,
}

enum Source<'a> {
    /// A param or a scalar input.
    Constant(f64),
    /// A vector along N (one value per column) or M (one per row).
    PerCol(&'a HostTensor),
    PerRow(&'a HostTensor),
    Matrix(&'a HostTensor),
}

impl<'a> CompiledEpilogue<'a> {
    fn new(spec: &'a KernelSpec, problem: &'a Problem) -> Result<Self, ReferenceError> {
        let expr = &spec.epilogue.expr;
        let names = expr
            .references()
            .into_iter()
            .map(|name| {
                let source = source(&name, problem)?;
                Ok((name, source))
            })
            .collect::<Result<_, _>>()?;
        Ok(CompiledEpilogue { expr, names })
    }

    fn eval(&self, r: u64, c: u64, acc: f64) -> f64 {
        let value = |name: &str| match self.names.iter().find(|(n, _)| n == name) {
            Some((_, Source::Constant(v))) => *v,
            Some((_, Source::PerCol(t))) => t.element(0, c),
            Some((_, Source::PerRow(t))) => t.element(0, r),
            Some((_, Source::Matrix(t))) => t.element(r, c),
            // `new` resolved every name the expression references.
            None => f64::NAN,
        };
        self.expr.eval(&value, acc)
    }
}

fn source<'a>(name: &str, problem: &'a Problem) -> Result<Source<'a>, ReferenceError> {
    if let Some((_, v)) = problem.params.iter().find(|(p, _)| p == name) {
        return Ok(Source::Constant(*v));
    }
    let tensor = problem
        .tensor(name)
        .ok_or_else(|| ReferenceError::UnknownVariable { name: name.into() })?;
    Ok(match tensor.role {
        Role::Scalar => Source::Constant(tensor.element(0, 0)),
        Role::ColVector => Source::PerCol(tensor),
        Role::RowVector => Source::PerRow(tensor),
        Role::C => Source::Matrix(tensor),
        ref role => {
            return Err(ReferenceError::UnreadableVariable {
                name: name.into(),
                role: format!("{role:?}"),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::preset;
    use crate::spec::{
        erf, BinaryOp, DimDomain, Direction, Epilogue, Func, KernelSpec, Operand as SpecOperand,
        Param, ScaleGranularity, ShapeSpec, TargetRef,
    };

    /// An f32 scale tensor of `of` (row-major when two-dim).
    fn scale(name: &str, of: &str, dims: Vec<Dim>, granularity: ScaleGranularity) -> SpecOperand {
        SpecOperand {
            name: name.into(),
            direction: Direction::Input,
            dtype: DType::F32,
            dims,
            layout: Layout::Row,
            role: Role::Scale {
                of: of.into(),
                granularity,
            },
        }
    }

    fn matrix(
        name: &str,
        dtype: DType,
        dims: [ShapeSym; 2],
        layout: Layout,
        role: Role,
    ) -> SpecOperand {
        SpecOperand {
            name: name.into(),
            direction: if role == Role::D {
                Direction::Output
            } else {
                Direction::Input
            },
            dtype,
            dims: dims.iter().map(|s| Dim::Sym(*s)).collect(),
            layout,
            role,
        }
    }

    /// D = epilogue(A·B) with the given dtypes and layouts.
    fn spec(input: DType, output: DType, layouts: [Layout; 3], expr: Expr) -> KernelSpec {
        use ShapeSym::*;
        KernelSpec {
            name: "t".into(),
            target: TargetRef::Preset("h200".into()),
            hardware: preset("h200").expect("h200 preset exists"),
            operands: vec![
                matrix("A", input, [M, K], layouts[0], Role::A),
                matrix("B", input, [K, N], layouts[1], Role::B),
                matrix("D", output, [M, N], layouts[2], Role::D),
            ],
            params: vec![],
            accumulate: DType::F32,
            epilogue: Epilogue {
                output: "D".into(),
                expr,
            },
            shape: ShapeSpec {
                m: DimDomain::Fixed(1),
                n: DimDomain::Fixed(1),
                k: DimDomain::Fixed(1),
                fallback: crate::spec::ShapeFallback::None,
            },
            constraints: vec![],
            tiling: vec![],
        }
    }

    /// A naive f64 GEMM + epilogue straight from the encoded tensors: the oracle for `check`.
    fn naive_output(
        spec: &KernelSpec,
        p: &Problem,
        perturb: impl Fn(u64, u64, f64) -> f64,
    ) -> Vec<u8> {
        let (a, b) = (p.tensor("A").unwrap(), p.tensor("B").unwrap());
        let d = p.output().unwrap();
        let epilogue = CompiledEpilogue::new(spec, p).unwrap();
        let size = d.dtype.size_bytes() as usize;
        let mut out = d.bytes.clone();
        for r in 0..p.shape.m {
            for c in 0..p.shape.n {
                let acc: f64 = (0..p.shape.k)
                    .map(|k| a.element(r, k) * b.element(k, c))
                    .sum();
                let at = d.geometry.offset(r, c) as usize * size;
                let v = perturb(r, c, epilogue.eval(r, c, acc));
                encode_into(d.dtype, v, &mut out[at..at + size]);
            }
        }
        out
    }

    #[test]
    fn inputs_are_seeded_rounded_padded_and_non_zero() {
        let s = spec(
            DType::Bf16,
            DType::F32,
            [Layout::Col, Layout::Row, Layout::Row],
            Expr::Acc,
        );
        let options = ProblemOptions {
            seed: 7,
            ld_pad: 3,
            params: vec![],
        };
        let p = Problem::generate(&s, Shape::new(5, 6, 7), &options).unwrap();
        let again = Problem::generate(&s, Shape::new(5, 6, 7), &options).unwrap();
        let other = Problem::generate(
            &s,
            Shape::new(5, 6, 7),
            &ProblemOptions {
                seed: 8,
                ..options.clone()
            },
        )
        .unwrap();
        let a = p.tensor("A").unwrap();
        // A is col-major [5, 7]: 7 columns of 5 + 3 padding.
        assert_eq!(a.geometry.ld, 8);
        assert_eq!(a.bytes.len(), (6 * 8 + 5) * 2);
        assert_eq!(a.bytes, again.tensor("A").unwrap().bytes);
        assert_ne!(a.bytes, other.tensor("A").unwrap().bytes);
        // Padding between columns is poison; the elements are bf16 values in (-1, 1), not all 0.
        assert!(decode(DType::Bf16, &a.bytes[10..12]).is_nan());
        let values: Vec<f64> = (0..5)
            .flat_map(|r| (0..7).map(move |c| (r, c)))
            .map(|(r, c)| a.element(r, c))
            .collect();
        assert!(values
            .iter()
            .all(|v| v.abs() < 1.0 && round_to(DType::Bf16, *v) == *v));
        assert!(values.iter().any(|v| *v != 0.0));
        // The output is all poison.
        assert_eq!(count_poison(p.output().unwrap()), 30);
    }

    #[test]
    fn exact_output_passes_and_errors_are_caught() {
        use Layout::*;
        for layouts in [[Row, Col, Row], [Col, Row, Col], [Row, Row, Row]] {
            let s = spec(DType::F16, DType::F32, layouts, Expr::Acc);
            let options = ProblemOptions {
                seed: 1,
                ld_pad: 1,
                params: vec![],
            };
            let p = Problem::generate(&s, Shape::new(9, 11, 13), &options).unwrap();
            let good = p.check(&s, &naive_output(&s, &p, |_, _, v| v)).unwrap();
            assert!(good.passed && good.error < 1e-7, "{layouts:?}: {good:?}");
            assert_eq!(good.checked, 99);
            assert!(!good.sampled);
            // One element off by 50% of its value fails a 1e-2 tolerance on 99 elements? The norm
            // of 99 values dilutes it; use a systematic 2% error instead.
            let bad = p
                .check(&s, &naive_output(&s, &p, |_, _, v| v * 1.02))
                .unwrap();
            assert!(!bad.passed && (bad.error - 0.02).abs() < 1e-3, "{bad:?}");
            // The poisoned output fails with every element unwritten.
            let untouched = p.check(&s, &p.output().unwrap().bytes).unwrap();
            assert_eq!(untouched.unwritten, 99);
            assert!(!untouched.passed);
        }
    }

    /// An fp8 D is checked against the value it stores (saturated at 448) and each element
    /// within one ulp: exact bytes pass, one element two ulps off fails however small the norm.
    #[test]
    fn fp8_outputs_saturate_and_are_held_to_one_ulp() {
        let scaled = Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Acc),
            Box::new(Expr::Number(400.0)),
        );
        let s = spec(
            DType::Bf16,
            DType::E4m3,
            [Layout::Row, Layout::Col, Layout::Row],
            scaled,
        );
        let p = Problem::generate(&s, Shape::new(16, 24, 32), &ProblemOptions::default()).unwrap();
        let exact = naive_output(&s, &p, |_, _, v| v);
        let d = HostTensor {
            bytes: exact.clone(),
            ..p.output().unwrap().clone()
        };
        // Sums of O(1) times 400: many saturate.
        let saturated = (0..16)
            .flat_map(|r| (0..24).map(move |c| (r, c)))
            .filter(|&(r, c)| d.element(r, c).abs() == 448.0)
            .count();
        assert!(saturated > 10, "{saturated} saturated");
        let good = p.check(&s, &exact).unwrap();
        assert!(good.passed && good.error < 1e-12, "{good:?}");
        assert!(good.fp8.is_some_and(|f| f.worst_excess == 0.0), "{good:?}");
        // One unsaturated element moved by two of its ulps.
        let (r, c) = (0..16)
            .flat_map(|r| (0..24).map(move |c| (r, c)))
            .find(|&(r, c)| (1.0..200.0).contains(&d.element(r, c).abs()))
            .unwrap();
        let bad = naive_output(&s, &p, |rr, cc, v| {
            if (rr, cc) == (r, c) {
                let stored = round_to(DType::E4m3, v);
                stored + 2.0 * crate::codec::fp8_ulp(DType::E4m3, stored).unwrap()
            } else {
                v
            }
        });
        let check = p.check(&s, &bad).unwrap();
        assert!(check.error < check.tolerance, "{check:?}");
        // Its ulp is 8 or 16: far beyond the sums' error (1e-2 x rms).
        let fp8 = check.fp8.unwrap();
        assert!(
            !check.passed && fp8.worst_excess > fp8.allowed_excess,
            "{check:?}"
        );
    }

    /// `spec` with `amax: f32[] amax_of D` (or `f32[M]`).
    fn with_amax(mut spec: KernelSpec, per_row: bool) -> KernelSpec {
        spec.operands.push(SpecOperand {
            name: "amax".into(),
            direction: Direction::Output,
            dtype: DType::F32,
            dims: if per_row {
                vec![Dim::Sym(ShapeSym::M)]
            } else {
                vec![]
            },
            layout: Layout::Row,
            role: Role::Amax {
                of: "D".into(),
                per_row,
            },
        });
        spec
    }

    /// An amax output is checked against the largest |value| before D's rounding, per row or
    /// over D; a spec with one cannot be checked without its bytes.
    #[test]
    fn amax_outputs_are_checked_per_row_and_per_tensor() {
        let scaled = Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Acc),
            Box::new(Expr::Number(400.0)),
        );
        for per_row in [false, true] {
            let s = with_amax(
                spec(
                    DType::Bf16,
                    DType::E4m3,
                    [Layout::Row, Layout::Col, Layout::Row],
                    scaled.clone(),
                ),
                per_row,
            );
            let (m, n) = (16u64, 24u64);
            let p =
                Problem::generate(&s, Shape::new(m, n, 32), &ProblemOptions::default()).unwrap();
            let d = naive_output(&s, &p, |_, _, v| v);
            // The maxima of the unrounded values (beyond 448: D saturates, the amax does not).
            let (a, b) = (p.tensor("A").unwrap(), p.tensor("B").unwrap());
            let epilogue = CompiledEpilogue::new(&s, &p).unwrap();
            let value = |r: u64, c: u64| {
                let acc: f64 = (0..32).map(|k| a.element(r, k) * b.element(k, c)).sum();
                epilogue.eval(r, c, acc).abs()
            };
            let rows: Vec<f64> = (0..m)
                .map(|r| (0..n).map(|c| value(r, c)).fold(0.0, f64::max))
                .collect();
            let want: Vec<f64> = if per_row {
                rows.clone()
            } else {
                vec![rows.iter().copied().fold(0.0, f64::max)]
            };
            assert!(want.iter().any(|&v| v > 448.0), "{want:?}");
            let bytes = |values: &[f64]| -> Vec<u8> {
                values
                    .iter()
                    .flat_map(|&v| (v as f32).to_le_bytes())
                    .collect()
            };
            let good = p.check_outputs(&s, &d, Some(&bytes(&want))).unwrap();
            assert!(good.passed, "{good:?}");
            assert_eq!(good.amax.unwrap().checked, want.len() as u64);
            let mut off = want.clone();
            *off.last_mut().unwrap() *= 0.99;
            let bad = p.check_outputs(&s, &d, Some(&bytes(&off))).unwrap();
            assert!(!bad.passed && bad.amax.unwrap().error > 5e-3, "{bad:?}");
            assert!(matches!(
                p.check(&s, &d),
                Err(ReferenceError::AmaxBytes { .. })
            ));
        }
    }

    /// Checked on sampled lines, a tensor's amax must reach the sampled maximum and stay within
    /// D's rounding of D's largest element.
    #[test]
    fn a_sampled_tensor_amax_is_bounded_both_ways() {
        let s = with_amax(
            spec(
                DType::Bf16,
                DType::Bf16,
                [Layout::Row, Layout::Col, Layout::Row],
                Expr::Acc,
            ),
            false,
        );
        let mut p =
            Problem::generate(&s, Shape::new(200, 150, 16), &ProblemOptions::default()).unwrap();
        p.full_reference_macs = 1;
        let d = naive_output(&s, &p, |_, _, v| v);
        let stored = HostTensor {
            bytes: d.clone(),
            ..p.output().unwrap().clone()
        };
        let (largest, saturated, _) = largest_stored(&stored);
        assert!(!saturated);
        let check = |amax: f64| {
            p.check_outputs(&s, &d, Some(&(amax as f32).to_le_bytes()))
                .unwrap()
        };
        let good = check(largest);
        assert!(good.sampled && good.passed, "{good:?}");
        assert!(!check(largest * 1.5).passed);
        assert!(!check(largest * 0.5).passed);
    }

    #[test]
    fn expected_output_stores_the_epilogue_as_a_kernel_does() {
        let s = spec(
            DType::Bf16,
            DType::F32,
            [Layout::Row, Layout::Col, Layout::Col],
            Expr::Cast(DType::I8, Box::new(Expr::Acc)),
        );
        let options = ProblemOptions {
            ld_pad: 1,
            ..Default::default()
        };
        let mut p = Problem::generate(&s, Shape::new(3, 4, 2), &options).unwrap();
        // acc = t[r] + c: ties, which cast<i8> rounds to even.
        let t = [0.5, 2.5, -1.5];
        let set = |p: &mut Problem, name: &str, r: u64, c: u64, v: f64| {
            let tensor = p.tensors.iter_mut().find(|t| t.name == name).unwrap();
            let at = tensor.geometry.offset(r, c) as usize * 2;
            encode_into(DType::Bf16, v, &mut tensor.bytes[at..at + 2]);
        };
        for (r, &v) in t.iter().enumerate() {
            set(&mut p, "A", r as u64, 0, v);
            set(&mut p, "A", r as u64, 1, 1.0);
        }
        for c in 0..4 {
            set(&mut p, "B", 0, c, 1.0);
            set(&mut p, "B", 1, c, c as f64);
        }
        let expected = p.expected_output(&s).unwrap();
        assert_eq!(expected, naive_output(&s, &p, |_, _, v| v));
        let d = HostTensor {
            bytes: expected.clone(),
            ..p.output().unwrap().clone()
        };
        for (r, &v) in t.iter().enumerate() {
            for c in 0..4 {
                let want = (v + c as f64).round_ties_even();
                assert_eq!(d.element(r as u64, c), want, "({r}, {c})");
            }
        }
        // D is col-major with ld 4: the one padding element per column stays poisoned.
        assert_eq!(count_poison(&d), 0);
        assert!(decode(DType::F32, &expected[12..16]).is_nan());
        assert!(p.check(&s, &expected).unwrap().passed);
    }

    #[test]
    fn one_unwritten_element_fails_the_check() {
        let s = spec(DType::F32, DType::F32, [Layout::Row; 3], Expr::Acc);
        let p = Problem::generate(&s, Shape::new(4, 4, 4), &ProblemOptions::default()).unwrap();
        let out = naive_output(
            &s,
            &p,
            |r, c, v| if (r, c) == (3, 2) { f64::NAN } else { v },
        );
        let check = p.check(&s, &out).unwrap();
        assert_eq!(check.unwritten, 1);
        assert!(!check.passed);
        assert!(check.error < 1e-7);
    }

    #[test]
    fn epilogue_with_params_vectors_and_c() {
        use ShapeSym::*;
        let mut s = spec(
            DType::Bf16,
            DType::Bf16,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Call(
                Func::Gelu,
                vec![Expr::Binary(
                    BinaryOp::Add,
                    Box::new(Expr::Binary(
                        BinaryOp::Add,
                        Box::new(Expr::Binary(
                            BinaryOp::Mul,
                            Box::new(Expr::Var("alpha".into())),
                            Box::new(Expr::Acc),
                        )),
                        Box::new(Expr::Binary(
                            BinaryOp::Mul,
                            Box::new(Expr::Var("beta".into())),
                            Box::new(Expr::Var("C".into())),
                        )),
                    )),
                    Box::new(Expr::Var("bias".into())),
                )],
            ),
        );
        s.operands
            .push(matrix("C", DType::Bf16, [M, N], Layout::Col, Role::C));
        s.operands.push(SpecOperand {
            name: "bias".into(),
            direction: Direction::Input,
            dtype: DType::Bf16,
            dims: vec![Dim::Sym(N)],
            layout: Layout::Row,
            role: Role::ColVector,
        });
        s.params = vec![
            Param {
                name: "alpha".into(),
                dtype: DType::F32,
                default: Some(1.0),
            },
            Param {
                name: "beta".into(),
                dtype: DType::F32,
                default: None,
            },
        ];
        let options = ProblemOptions {
            seed: 3,
            ld_pad: 0,
            params: vec![("alpha".into(), 1.5)],
        };
        let p = Problem::generate(&s, Shape::new(6, 5, 40), &options).unwrap();
        assert_eq!(p.params[0], ("alpha".into(), 1.5));
        let beta = p.params[1].1;
        assert!((0.5..1.5).contains(&beta));
        // Check one element by hand.
        let (a, b, c, bias) = (
            p.tensor("A").unwrap(),
            p.tensor("B").unwrap(),
            p.tensor("C").unwrap(),
            p.tensor("bias").unwrap(),
        );
        let acc: f64 = (0..40).map(|k| a.element(2, k) * b.element(k, 4)).sum();
        let x = 1.5 * acc + beta * c.element(2, 4) + bias.element(0, 4);
        let want = 0.5 * x * (1.0 + erf(x / 2f64.sqrt()));
        let e = CompiledEpilogue::new(&s, &p).unwrap();
        assert!((e.eval(2, 4, acc) - want).abs() < 1e-12);
        let check = p.check(&s, &naive_output(&s, &p, |_, _, v| v)).unwrap();
        assert!(check.passed && check.error < 4e-3, "{check:?}");
    }

    #[test]
    fn unknown_epilogue_variable_is_an_error() {
        let s = spec(
            DType::F32,
            DType::F32,
            [Layout::Row; 3],
            Expr::Var("gamma".into()),
        );
        let p = Problem::generate(&s, Shape::new(2, 2, 2), &ProblemOptions::default()).unwrap();
        let err = p.check(&s, &p.output().unwrap().bytes).unwrap_err();
        assert_eq!(
            err,
            ReferenceError::UnknownVariable {
                name: "gamma".into()
            }
        );
    }

    #[test]
    fn fp8_block_scales_are_applied() {
        use ShapeSym::*;
        let mut s = spec(
            DType::E4m3,
            DType::Bf16,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Acc,
        );
        s.operands.push(scale(
            "sa",
            "A",
            vec![Dim::Sym(M), Dim::CeilDiv(K, 128)],
            ScaleGranularity::Block1x128,
        ));
        s.operands.push(scale(
            "sb",
            "B",
            vec![Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)],
            ScaleGranularity::Block128x128,
        ));
        let p = Problem::generate(
            &s,
            Shape::new(3, 130, 300),
            &ProblemOptions {
                seed: 5,
                ..Default::default()
            },
        )
        .unwrap();
        let (a, b, sa, sb) = (
            p.tensor("A").unwrap(),
            p.tensor("B").unwrap(),
            p.tensor("sa").unwrap(),
            p.tensor("sb").unwrap(),
        );
        assert_eq!((sa.geometry.rows, sa.geometry.cols), (3, 3));
        assert_eq!((sb.geometry.rows, sb.geometry.cols), (2, 3));
        let (r, c) = (1, 129);
        let acc: f64 = (0..300)
            .map(|k| {
                a.element(r, k)
                    * sa.element(r, k / 128)
                    * b.element(k, c)
                    * sb.element(c / 128, k / 128)
            })
            .sum();
        let a_rows = p.dequantized(&s, a, Operand::A).unwrap();
        let b_rows = p.dequantized(&s, b, Operand::B).unwrap();
        let got = dot(a_rows.row(r), b_rows.row(c));
        assert!(
            (got - acc).abs() < 1e-5 * acc.abs().max(1.0),
            "{got} vs {acc}"
        );
    }

    #[test]
    fn scaled_fp8_inputs_use_the_format_range_and_scales_undo_it() {
        use ShapeSym::*;
        // e4m3 A with a per-tensor scale, e5m2 B with 128x128 blocks.
        let mut s = spec(
            DType::E4m3,
            DType::Bf16,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Acc,
        );
        s.operands[1].dtype = DType::E5m2;
        s.operands
            .push(scale("sa", "A", vec![], ScaleGranularity::PerTensor));
        s.operands.push(scale(
            "sb",
            "B",
            vec![Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)],
            ScaleGranularity::Block128x128,
        ));
        let shape = Shape::new(64, 1024, 1024);
        let p = Problem::generate(&s, shape, &ProblemOptions::default()).unwrap();
        let values = |name: &str| {
            let t = p.tensor(name).unwrap();
            let g = t.geometry;
            (0..g.rows)
                .flat_map(|r| (0..g.cols).map(move |c| (r, c)))
                .map(|(r, c)| t.element(r, c))
                .collect::<Vec<f64>>()
        };
        let max_abs = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        // The codes reach the top binade of their format: above half the largest finite value.
        assert!(max_abs(&values("A")) > 224.0 && max_abs(&values("A")) <= 448.0);
        assert!(max_abs(&values("B")) > 28672.0 && max_abs(&values("B")) <= 57344.0);
        // Scales: positive, within 2^±2 of 1/max, and not all alike.
        let sb = values("sb");
        assert_eq!(sb.len(), 64);
        assert!(sb.iter().all(|&v| v > 0.25 / 57344.0 && v < 4.0 / 57344.0));
        let (lo, hi) = sb
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
        assert!(hi / lo > 4.0, "scales vary too little: {lo}..{hi}");
        let sa = values("sa");
        assert!(sa.len() == 1 && sa[0] > 0.25 / 448.0 && sa[0] < 4.0 / 448.0);
        // Dequantized, both operands are O(1) again.
        let a = p
            .dequantized(&s, p.tensor("A").unwrap(), Operand::A)
            .unwrap();
        let b = p
            .dequantized(&s, p.tensor("B").unwrap(), Operand::B)
            .unwrap();
        for rows in [&a.values, &b.values] {
            let peak = rows.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            assert!(peak > 0.2 && peak < 4.0, "dequantized peak {peak}");
        }
        // Unscaled FP8 operands keep the (-1, 1) data of every other dtype.
        let plain = spec(
            DType::E4m3,
            DType::Bf16,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Acc,
        );
        let p = Problem::generate(&plain, Shape::new(8, 8, 64), &ProblemOptions::default());
        let a = p.unwrap().tensor("A").unwrap().clone();
        // (Rounded to e4m3, 0.97 becomes 1.0: the bound is inclusive.)
        assert!((0..8).all(|r| (0..64).all(|k| a.element(r, k).abs() <= 1.0)));
    }

    #[test]
    fn large_problems_are_sampled_but_fully_poison_checked() {
        // A small problem with the sampling threshold lowered below its size.
        let s = spec(
            DType::Bf16,
            DType::F32,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Acc,
        );
        let shape = Shape::new(100, 80, 16);
        let mut p = Problem::generate(
            &s,
            shape,
            &ProblemOptions {
                seed: 11,
                ..Default::default()
            },
        )
        .unwrap();
        p.full_reference_macs = 100 * 80 * 16 - 1;
        let mut out = p.output().unwrap().bytes.clone();
        // Write every element but one, which may or may not lie on a sampled line: it is
        // counted as unwritten either way.
        for chunk in out.chunks_exact_mut(4) {
            chunk.copy_from_slice(&1.0f32.to_le_bytes());
        }
        out[4 * (50 * 80 + 33)..4 * (50 * 80 + 34)].copy_from_slice(&f32::NAN.to_le_bytes());
        let check = p.check(&s, &out).unwrap();
        assert!(check.sampled);
        assert_eq!(check.unwritten, 1);
        // 64 sampled rows of 80 and 64 sampled columns of 100, less the NaN where it was sampled.
        assert!((64 * 80 + 64 * 100 - 2..=64 * 80 + 64 * 100).contains(&check.checked));
        assert!(!check.passed);
    }

    #[test]
    fn sampled_lines_include_first_and_last() {
        let mut rng = SplitMix64::new(9);
        let lines = sample_lines(1000, &mut rng);
        assert_eq!(lines.len(), 64);
        assert_eq!((lines[0], lines[63]), (0, 999));
        assert!(lines.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sample_lines(5, &mut rng), vec![0, 1, 2, 3, 4]);
    }
}
