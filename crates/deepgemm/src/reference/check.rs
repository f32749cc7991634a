//! Comparing an output with the reference: error sums, sampled lines, poison, amax, fp8 ulps
//! and the tolerance of a spec's dtypes.

use super::*;

/// f64 dot product with independent partial sums (so the compiler can vectorize it).
pub(super) fn dot(a: &[f32], b: &[f32]) -> f64 {
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

pub(super) enum Line {
    Row(u64),
    Col(u64),
}

/// Up to [`SAMPLED_LINES`] distinct indices in 0..count: the first, the last, and random others.
pub(super) fn sample_lines(count: u64, rng: &mut SplitMix64) -> Vec<u64> {
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

pub(super) fn count_poison(tensor: &HostTensor) -> u64 {
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
pub(super) struct ErrorSums {
    pub(super) diff: f64,
    pub(super) reference: f64,
    pub(super) count: u64,
    /// fp8 D: the largest |D - ref| beyond one of D's ulps at ref (ref saturated first).
    pub(super) worst_excess: f64,
    /// The largest |ref| (before D's rounding; NaN ignored).
    pub(super) amax: f64,
    /// Per-row amax: the largest |ref| of each checked row.
    pub(super) amax_rows: Vec<(u64, f64)>,
}

impl ErrorSums {
    pub(super) fn add(mut self, other: ErrorSums) -> ErrorSums {
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
pub(super) fn largest_stored(d: &HostTensor) -> (f64, bool, f64) {
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
pub(super) fn relative_ulp(dtype: DType) -> f64 {
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
pub(super) fn check_amax(
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
pub(super) fn input_tolerance(spec: &KernelSpec) -> f64 {
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
