//! The dtype rules every generator shares: which accumulators and outputs some backend can
//! build. `check` (spec::sema) refuses a spec at the line that breaks one, and
//! [`super::check_supported`] applies the same functions, so `check` never accepts what
//! `compile` then cannot build.

use crate::dtype::DType;

/// Output dtypes the epilogues can store (fp8 with saturation to its largest finite value).
pub const OUTPUT_DTYPES: [DType; 5] = [
    DType::F32,
    DType::F16,
    DType::Bf16,
    DType::E4m3,
    DType::E5m2,
];

/// The accumulators some generator implements for `input`: f32 always (mma.sync and FFMA
/// accumulate in f32), and i32 for i8 inputs (the SIMT kernel's exact integer path).
pub fn accumulate_dtypes(input: DType) -> &'static [DType] {
    match input {
        DType::I8 => &[DType::I32, DType::F32],
        _ => &[DType::F32],
    }
}

/// Why no generator accumulates `input` in `acc`; `None` when one does.
pub fn accumulate_refusal(input: DType, acc: DType) -> Option<String> {
    let legal = accumulate_dtypes(input);
    if legal.contains(&acc) {
        return None;
    }
    let names: Vec<&str> = legal.iter().map(|d| d.name()).collect();
    Some(format!(
        "no generator accumulates {input} inputs in {acc} (they accumulate in {})",
        names.join(" or ")
    ))
}

/// "f32, f16, bf16, e4m3 or e5m2".
pub fn output_dtype_names() -> String {
    let names: Vec<&str> = OUTPUT_DTYPES.iter().map(|d| d.name()).collect();
    let (last, rest) = names.split_last().expect("OUTPUT_DTYPES is not empty");
    format!("{} or {last}", rest.join(", "))
}

/// Why no epilogue stores an output of `dtype`; `None` when they do.
pub fn output_refusal(dtype: DType) -> Option<String> {
    if OUTPUT_DTYPES.contains(&dtype) {
        return None;
    }
    Some(format!(
        "no epilogue stores {dtype} outputs (they store {})",
        output_dtype_names()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_of_issue_9() {
        assert!(accumulate_refusal(DType::F16, DType::F16).is_some());
        assert!(accumulate_refusal(DType::F16, DType::F32).is_none());
        assert!(accumulate_refusal(DType::I8, DType::I32).is_none());
        assert!(accumulate_refusal(DType::I8, DType::F32).is_none());
        assert!(output_refusal(DType::E4m3).is_none());
        assert_eq!(output_dtype_names(), "f32, f16, bf16, e4m3 or e5m2");
        assert!(output_refusal(DType::I32).is_some());
        assert!(output_refusal(DType::Bf16).is_none());
    }
}
