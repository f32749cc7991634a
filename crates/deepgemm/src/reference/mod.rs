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
//!
//! The parts: [`tensor`] (host tensors and operand geometry, which the runtime uses too),
//! `inputs` (the seeded generator and each operand's distribution), `check` (error sums, sampled
//! lines, amax and fp8 checks, tolerances) and `epilogue` (the spec's epilogue resolved against a
//! problem's operands; the expression's meaning is `Expr::eval`'s).

use crate::codec::{
    decode, encode_into, fp8_max_finite, fp8_ulp, is_poison, poison_byte, round_to,
};
use crate::dtype::DType;
use crate::plan::Shape;
use crate::spec::{Dim, Direction, Expr, KernelSpec, Layout, Role, ShapeSym};
use rayon::prelude::*;
use thiserror::Error;

mod check;
mod epilogue;
mod inputs;
pub mod tensor;
#[cfg(test)]
mod tests;

use check::*;
pub use check::{tolerance, AmaxCheck, Check, Fp8Check};
use epilogue::*;
use inputs::*;
use tensor::*;
pub use tensor::{operand_geometry, Geometry, HostTensor};

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
