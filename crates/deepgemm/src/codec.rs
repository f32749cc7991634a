//! Element values and their bytes, exactly as the generated kernels convert them.
//!
//! A kernel computes in f32 and converts with the functions of `kernels/prelude.cuh`. Each
//! conversion here is the prelude's, transcribed: [`round_to`] is what `cast<dtype>(x)` does to
//! the f32 nearest `x` (and what storing it would do), [`encode`] the bytes a kernel would
//! store, [`decode`] the f32 a kernel would read. The CPU reference and the epilogue language
//! ([`crate::spec::Expr::eval`]) use these, so a value that lands on a tie rounds the same way
//! on both sides.
//!
//! | dtype | rounding of the f32 value (prelude function) | out of range |
//! |---|---|---|
//! | f32 | none | — |
//! | tf32 | 10 mantissa bits, ties away from zero (`dg_round_tf32`) | inf, NaN pass through |
//! | f16 | nearest, ties to even (`cvt.rn.f16.f32`) | ±inf past 65504 (from 65520 on) |
//! | bf16 | nearest, ties to even (`dg_bf16_bits`) | ±inf, as f32's rounding carries |
//! | e4m3 | nearest, ties to even (`dg_round_fp8`) | ±448 (satfinite), inf included |
//! | e5m2 | nearest, ties to even (`dg_round_fp8`) | ±57344 (satfinite), inf included |
//! | i8 | nearest integer, ties to even (`rintf`) | −128..=127; NaN gives −128 (`fmaxf` drops it) |
//! | i32 | nearest integer, ties to even (`__float2int_rn`), back to f32 | saturates; NaN gives 0 |

use crate::dtype::DType;
use half::{bf16, f16};

/// `cast<dtype>(x)` as a kernel computes it: `x` becomes the nearest f32 (the kernel's value)
/// and is rounded to `dtype` by the prelude's rule (see the module table).
pub fn round_to(dtype: DType, x: f64) -> f64 {
    let x = x as f32;
    let rounded = match dtype {
        DType::F32 => x,
        DType::Tf32 => round_tf32(x),
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::Bf16 => bf16::from_f32(x).to_f32(),
        DType::E4m3 => round_fp8(x, E4M3),
        DType::E5m2 => round_fp8(x, E5M2),
        // `fminf(fmaxf(rintf(x), -128), 127)`: fmaxf drops a NaN, which leaves -128.
        DType::I8 if x.is_nan() => -128.0,
        DType::I8 => x.round_ties_even().clamp(-128.0, 127.0),
        // `(float)__float2int_rn(x)`: saturating, NaN to 0, as Rust's `as i32` is.
        DType::I32 => x.round_ties_even() as i32 as f32,
    };
    rounded as f64
}

/// One element of `dtype` as a kernel stores it, little-endian, rounded as [`round_to`] says.
pub fn encode(dtype: DType, x: f64) -> Vec<u8> {
    let mut out = vec![0u8; dtype.size_bytes() as usize];
    encode_into(dtype, x, &mut out);
    out
}

/// The largest finite value of an FP8 dtype (448 for e4m3, 57344 for e5m2), where its rounding
/// saturates; `None` for the other dtypes.
pub fn fp8_max_finite(dtype: DType) -> Option<f64> {
    match dtype {
        DType::E4m3 => Some(E4M3.max_finite as f64),
        DType::E5m2 => Some(E5M2.max_finite as f64),
        _ => None,
    }
}

/// The spacing of an FP8 dtype's values around `x` (one unit in the last place): the quantum of
/// x's binade, that of the subnormals below the smallest normal, that of the largest finite
/// value's binade above it. `None` for the other dtypes.
pub fn fp8_ulp(dtype: DType, x: f64) -> Option<f64> {
    let format = match dtype {
        DType::E4m3 => E4M3,
        DType::E5m2 => E5M2,
        _ => return None,
    };
    let magnitude = (x.abs() as f32).min(format.max_finite);
    let exponent = (((magnitude.to_bits() >> 23) & 0xFF) as i32 - 127).max(format.min_exponent());
    Some(pow2(exponent - format.mantissa_bits) as f64)
}

/// [`encode`] into `out`, which holds exactly one element.
pub fn encode_into(dtype: DType, x: f64, out: &mut [u8]) {
    let v = round_to(dtype, x) as f32;
    match dtype {
        DType::F32 | DType::Tf32 => out.copy_from_slice(&v.to_le_bytes()),
        // Rounding again is exact: `v` is already an f16 (bf16) value.
        DType::F16 => out.copy_from_slice(&f16::from_f32(v).to_le_bytes()),
        DType::Bf16 => out.copy_from_slice(&bf16::from_f32(v).to_le_bytes()),
        DType::E4m3 => out[0] = fp8_code(v, E4M3),
        DType::E5m2 => out[0] = fp8_code(v, E5M2),
        DType::I8 => out[0] = (v as i8) as u8,
        DType::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
    }
}

/// One little-endian element of `dtype`, as the kernel's `dg_to_float` reads it.
pub fn decode(dtype: DType, bytes: &[u8]) -> f64 {
    match dtype {
        DType::F32 | DType::Tf32 => f32::from_le_bytes(four(bytes)) as f64,
        DType::F16 => f16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::Bf16 => bf16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::E4m3 => e4m3_value(bytes[0]) as f64,
        // e5m2 is the top byte of an f16, which is how the prelude reads it.
        DType::E5m2 => f16::from_bits((bytes[0] as u16) << 8).to_f64(),
        DType::I8 => bytes[0] as i8 as f64,
        DType::I32 => i32::from_le_bytes(four(bytes)) as f64,
    }
}

fn four(bytes: &[u8]) -> [u8; 4] {
    [bytes[0], bytes[1], bytes[2], bytes[3]]
}

/// The byte pattern written over an output before a run. For float types it is a NaN (all ones:
/// a NaN in f32, f16, bf16, e4m3 and e5m2 alike); integers have no NaN, so they get 0x80808080,
/// a value no test GEMM of small integers produces.
pub fn poison_byte(dtype: DType) -> u8 {
    if dtype.is_float() {
        0xff
    } else {
        0x80
    }
}

/// Whether one element still holds [`poison_byte`]'s pattern (any NaN, for floats).
pub fn is_poison(dtype: DType, bytes: &[u8]) -> bool {
    if dtype.is_float() {
        decode(dtype, bytes).is_nan()
    } else {
        bytes.iter().all(|&b| b == 0x80)
    }
}

/// `dg_round_tf32`: add half of the 13 dropped bits' range and truncate, i.e. the nearest tf32
/// with ties away from zero (`cvt.rna.tf32.f32`).
fn round_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits((x.to_bits() + 0x1000) & 0xFFFF_E000)
}

/// An OCP 8-bit float: explicit mantissa bits, exponent bias and largest finite value.
#[derive(Clone, Copy)]
struct Fp8 {
    mantissa_bits: i32,
    bias: i32,
    max_finite: f32,
}

const E4M3: Fp8 = Fp8 {
    mantissa_bits: 3,
    bias: 7,
    max_finite: 448.0,
};
const E5M2: Fp8 = Fp8 {
    mantissa_bits: 2,
    bias: 15,
    max_finite: 57344.0,
};

impl Fp8 {
    /// The exponent of the smallest normal value; subnormals share its quantum.
    fn min_exponent(self) -> i32 {
        1 - self.bias
    }
}

/// 2^e as an f32, for the normal exponents (-126..=127) the FP8 formats need.
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// `dg_round_fp8`: the magnitude divided by the quantum of its binade (exact, a power of two),
/// rounded to an integer with ties to even (`rintf`), scaled back and saturated.
fn round_fp8(x: f32, format: Fp8) -> f32 {
    if x.is_nan() {
        return x;
    }
    let magnitude = x.abs();
    let exponent = (((magnitude.to_bits() >> 23) & 0xFF) as i32 - 127).max(format.min_exponent());
    let quantum = pow2(exponent - format.mantissa_bits);
    let rounded = ((magnitude / quantum).round_ties_even() * quantum).min(format.max_finite);
    rounded.copysign(x)
}

/// The code of `v`, a value of the format ([`round_fp8`]'s result); NaN is S.1111.111 in e4m3
/// and one of e5m2's NaNs.
fn fp8_code(v: f32, format: Fp8) -> u8 {
    if v.is_nan() {
        return 0x7f;
    }
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    let magnitude = v.abs();
    let exponent = ((magnitude.to_bits() >> 23) & 0xFF) as i32 - 127;
    let code = if magnitude == 0.0 {
        0
    } else if exponent < format.min_exponent() {
        // A subnormal: a whole number of the smallest quantum.
        (magnitude / pow2(format.min_exponent() - format.mantissa_bits)) as u32
    } else {
        let mantissa_mask = (1 << format.mantissa_bits) - 1;
        let mantissa = (magnitude.to_bits() >> (23 - format.mantissa_bits)) & mantissa_mask;
        (((exponent + format.bias) as u32) << format.mantissa_bits) | mantissa
    };
    sign | code as u8
}

/// The prelude's `dg_to_float(dg_e4m3)`: e4m3 has no infinities and one NaN code per sign.
fn e4m3_value(code: u8) -> f32 {
    let sign = ((code as u32) & 0x80) << 24;
    let exponent = (code as u32 >> 3) & 0xF;
    let mantissa = code as u32 & 0x7;
    let magnitude = if exponent == 15 && mantissa == 7 {
        f32::NAN
    } else if exponent == 0 {
        mantissa as f32 * pow2(-9)
    } else {
        f32::from_bits(((exponent + 120) << 23) | (mantissa << 20))
    };
    f32::from_bits(magnitude.to_bits() | sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p2(e: i32) -> f64 {
        2f64.powi(e)
    }

    /// `round_to` at exact ties, on both sides of zero, in the normal and subnormal range, and at
    /// the saturation limits: the values `kernels/prelude.cuh` gives.
    #[test]
    fn ties_round_as_the_prelude_does() {
        let cases: &[(DType, f64, f64)] = &[
            // rintf: ties to the even integer; fminf(fmaxf(...)) saturates after rounding.
            (DType::I8, 0.5, 0.0),
            (DType::I8, 1.5, 2.0),
            (DType::I8, 2.5, 2.0),
            (DType::I8, 3.5, 4.0),
            (DType::I8, -2.5, -2.0),
            (DType::I8, -3.5, -4.0),
            (DType::I8, 126.5, 126.0),
            (DType::I8, 127.5, 127.0),
            (DType::I8, -128.5, -128.0),
            (DType::I8, 300.0, 127.0),
            (DType::I8, f64::NEG_INFINITY, -128.0),
            // f16: 10 mantissa bits; 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
            (DType::F16, 1.0 + p2(-11), 1.0),
            (DType::F16, 1.0 + 3.0 * p2(-11), 1.0 + p2(-9)),
            (DType::F16, -(1.0 + 3.0 * p2(-11)), -(1.0 + p2(-9))),
            (DType::F16, 2049.0, 2048.0),
            (DType::F16, 2051.0, 2052.0),
            (DType::F16, p2(-25), 0.0), // half the smallest subnormal
            (DType::F16, 3.0 * p2(-25), p2(-23)),
            (DType::F16, 65519.0, 65504.0),
            (DType::F16, 65520.0, f64::INFINITY), // cvt.rn does not saturate
            (DType::F16, -65520.0, f64::NEG_INFINITY),
            // bf16: 7 mantissa bits.
            (DType::Bf16, 1.0 + p2(-8), 1.0),
            (DType::Bf16, 1.0 + 3.0 * p2(-8), 1.0 + p2(-6)),
            (DType::Bf16, -(1.0 + p2(-8)), -1.0),
            (DType::Bf16, 257.0, 256.0),
            (DType::Bf16, 259.0, 260.0),
            (DType::Bf16, f32::MAX as f64, f64::INFINITY),
            // e4m3: 3 mantissa bits, subnormals in steps of 2^-9, satfinite at 448.
            (DType::E4m3, 1.0625, 1.0),
            (DType::E4m3, 1.1875, 1.25),
            (DType::E4m3, -1.1875, -1.25),
            (DType::E4m3, p2(-10), 0.0),
            (DType::E4m3, 3.0 * p2(-10), p2(-8)),
            (DType::E4m3, 464.0, 448.0),
            (DType::E4m3, 1e6, 448.0),
            (DType::E4m3, f64::INFINITY, 448.0),
            (DType::E4m3, f64::NEG_INFINITY, -448.0),
            // e5m2: 2 mantissa bits, subnormals in steps of 2^-16, satfinite at 57344.
            (DType::E5m2, 1.125, 1.0),
            (DType::E5m2, 1.375, 1.5),
            (DType::E5m2, p2(-17), 0.0),
            (DType::E5m2, 3.0 * p2(-17), p2(-15)),
            (DType::E5m2, 61440.0, 57344.0),
            (DType::E5m2, 1e6, 57344.0),
            // tf32: ties away from zero (cvt.rna), unlike every other cast.
            (DType::Tf32, 1.0 + p2(-11), 1.0 + p2(-10)),
            (DType::Tf32, -(1.0 + p2(-11)), -(1.0 + p2(-10))),
            (DType::Tf32, 1.0 + p2(-12), 1.0),
            // i32: __float2int_rn, then back to f32.
            (DType::I32, 2.5, 2.0),
            (DType::I32, -3.5, -4.0),
            (DType::I32, 3e9, 2147483648.0),
            (DType::I32, -3e9, -2147483648.0),
            (DType::F32, 0.1, 0.1f32 as f64),
        ];
        for &(dtype, x, want) in cases {
            assert_eq!(round_to(dtype, x), want, "cast<{dtype}>({x})");
        }
    }

    #[test]
    fn nan_and_signed_zero_follow_the_prelude() {
        // rintf(-0.5) is -0 and fmaxf(-0, -128) keeps it.
        assert_eq!(round_to(DType::I8, -0.5).to_bits(), (-0.0f64).to_bits());
        assert_eq!(
            round_to(DType::Bf16, -p2(-140)).to_bits(),
            (-0.0f64).to_bits()
        );
        // fmaxf(NaN, -128) is -128; __float2int_rn(NaN) is 0; floats keep the NaN.
        assert_eq!(round_to(DType::I8, f64::NAN), -128.0);
        assert_eq!(round_to(DType::I32, f64::NAN), 0.0);
        for dtype in [
            DType::F16,
            DType::Bf16,
            DType::Tf32,
            DType::E4m3,
            DType::E5m2,
        ] {
            assert!(round_to(dtype, f64::NAN).is_nan(), "{dtype}");
        }
    }

    /// The kernel holds an f32, so `x` is rounded to f32 first: just above a bf16 tie by less
    /// than an f32 ulp is the tie itself, which goes to even.
    #[test]
    fn casts_round_the_f32_value() {
        assert_eq!(round_to(DType::Bf16, 1.0 + p2(-8) + p2(-30)), 1.0);
        assert_eq!(round_to(DType::Bf16, 1.0 + p2(-8) + p2(-20)), 1.0 + p2(-7));
    }

    /// The prelude's `dg_bf16_bits`, transcribed, agrees with the bf16 conversion used here on
    /// every tie, every value just off one, and the specials.
    #[test]
    fn bf16_is_the_preludes_bit_formula() {
        let prelude = |u: u32| -> u16 {
            if (u & 0x7FFF_FFFF) > 0x7F80_0000 {
                return ((u >> 16) | 0x40) as u16;
            }
            ((u.wrapping_add(0x7FFF).wrapping_add((u >> 16) & 1)) >> 16) as u16
        };
        for high in (0u32..=0xFFFF).step_by(7) {
            for low in [0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF] {
                let u = (high << 16) | low;
                let got = bf16::from_f32(f32::from_bits(u)).to_bits();
                assert_eq!(got, prelude(u), "f32 bits {u:#010x}");
            }
        }
    }

    #[test]
    fn encoded_ties_have_the_even_code() {
        assert_eq!(encode(DType::Bf16, 1.0 + p2(-8)), vec![0x80, 0x3f]);
        assert_eq!(encode(DType::F16, 1.0 + p2(-11)), vec![0x00, 0x3c]);
        assert_eq!(encode(DType::I8, -2.5), vec![0xfe]);
        assert_eq!(encode(DType::I32, 2.5), vec![2, 0, 0, 0]);
        assert_eq!(encode(DType::E4m3, 1.0625), vec![0x38]);
        assert_eq!(encode(DType::E5m2, -1.125), vec![0xbc]);
    }

    #[test]
    fn fp8_codes_round_trip() {
        for dtype in [DType::E4m3, DType::E5m2] {
            for code in 0u8..=255 {
                let v = decode(dtype, &[code]);
                // -0 encodes as 0x80; every other finite value as its own code.
                if v.is_finite() {
                    assert_eq!(encode(dtype, v), vec![code], "{dtype} code {code:#x}");
                }
            }
        }
        assert_eq!(decode(DType::E4m3, &[0x7e]), 448.0);
        assert_eq!(decode(DType::E5m2, &[0x7b]), 57344.0);
        assert!(decode(DType::E4m3, &[0x7f]).is_nan());
        assert!(decode(DType::E4m3, &[0xff]).is_nan());
        assert_eq!(decode(DType::E5m2, &[0x7c]), f64::INFINITY);
        assert_eq!(decode(DType::E4m3, &[0x01]), p2(-9)); // the smallest subnormal
        assert_eq!(decode(DType::E5m2, &[0x01]), p2(-16));
        assert_eq!(round_to(DType::E4m3, 1.07), 1.125);
        assert_eq!(round_to(DType::E4m3, -0.3), -0.3125);
    }

    #[test]
    fn fp8_ulps_are_the_spacing_of_the_values() {
        assert_eq!(fp8_ulp(DType::E4m3, 1.0), Some(0.125));
        assert_eq!(fp8_ulp(DType::E4m3, -1.9), Some(0.125));
        assert_eq!(fp8_ulp(DType::E4m3, 300.0), Some(32.0));
        assert_eq!(fp8_ulp(DType::E4m3, 1e6), Some(32.0)); // saturates at 448
        assert_eq!(fp8_ulp(DType::E4m3, 1e-4), Some(p2(-9))); // subnormals
        assert_eq!(fp8_ulp(DType::E5m2, 1.0), Some(0.25));
        assert_eq!(fp8_ulp(DType::E5m2, 0.0), Some(p2(-16)));
        assert_eq!(fp8_ulp(DType::Bf16, 1.0), None);
    }

    #[test]
    fn poison_is_nan_in_every_float_dtype() {
        for dtype in DType::ALL.into_iter().filter(|d| d.is_float()) {
            let bytes = vec![poison_byte(dtype); dtype.size_bytes() as usize];
            assert!(is_poison(dtype, &bytes), "{dtype}");
            assert!(!is_poison(dtype, &encode(dtype, 0.5)), "{dtype}");
        }
        assert!(is_poison(DType::I32, &[0x80; 4]));
        assert!(!is_poison(DType::I32, &encode(DType::I32, 1.0)));
    }
}
