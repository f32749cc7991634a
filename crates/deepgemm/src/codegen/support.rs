//! The dtype rules every generator shares: which accumulators and outputs some backend can
//! build. `check` (spec::sema) refuses a spec at the line that breaks one, and
//! [`super::check_supported`] applies the same functions, so `check` never accepts what
//! `compile` then cannot build.

use crate::dtype::DType;

/// Output dtypes the epilogues can store.
pub const OUTPUT_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

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

/// Why no epilogue stores an output of `dtype`; `None` when they do.
pub fn output_refusal(dtype: DType) -> Option<String> {
    if OUTPUT_DTYPES.contains(&dtype) {
        return None;
    }
    Some(format!(
        "no epilogue stores {dtype} outputs (they store f32, f16 or bf16)"
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
        assert!(output_refusal(DType::E4m3).is_some());
        assert!(output_refusal(DType::I32).is_some());
        assert!(output_refusal(DType::Bf16).is_none());
    }
}
