//! Seeded random inputs: SplitMix64, the value distribution of each operand, and its bytes.

use super::*;

/// SplitMix64: tiny, fast, and good enough for test data; seeded per chunk so generation is
/// parallel and still deterministic.
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub(super) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * unit
    }

    /// Uniform in 0..n.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

pub(super) fn mix(a: u64, b: u64) -> u64 {
    SplitMix64::new(a ^ b.wrapping_mul(0xd6e8_feb8_6659_fd93)).next_u64()
}

/// How an operand's elements are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Distribution {
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
pub(super) const PLAIN_SCALE: Distribution = Distribution::Uniform(0.5, 2.0);

/// The distribution of `operand`'s elements in `spec`.
pub(super) fn distribution(spec: &KernelSpec, operand: &crate::spec::Operand) -> Distribution {
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

pub(super) fn sample_value(rng: &mut SplitMix64, distribution: Distribution) -> f64 {
    match distribution {
        Distribution::Uniform(lo, hi) => rng.uniform(lo, hi),
        Distribution::SmallIntegers => rng.below(17) as f64 - 8.0,
        Distribution::Fp8Codes { max } => rng.uniform(-max, max),
        Distribution::Fp8Scale { max } => rng.uniform(-2.0, 2.0).exp2() / max,
    }
}

/// Elements generated per independently seeded chunk.
pub(super) const GENERATION_CHUNK: u64 = 1 << 16;

pub(super) fn generate_bytes(
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
