//! Element types that DeepGEMM understands, with the facts every layer needs about them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An element type of an operand, a parameter or the accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    Tf32,
    F16,
    Bf16,
    E4m3,
    E5m2,
    I8,
    I32,
}

impl DType {
    /// Every dtype, in the order the language documentation lists them.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::Tf32,
        DType::F16,
        DType::Bf16,
        DType::E4m3,
        DType::E5m2,
        DType::I8,
        DType::I32,
    ];

    /// The name used in `.dgml` files and hardware YAML.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Tf32 => "tf32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::E4m3 => "e4m3",
            DType::E5m2 => "e5m2",
            DType::I8 => "i8",
            DType::I32 => "i32",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes one element occupies in memory (tf32 is stored as f32).
    pub fn size_bytes(self) -> u32 {
        match self {
            DType::F32 | DType::Tf32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::E4m3 | DType::E5m2 | DType::I8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(self, DType::I8 | DType::I32)
    }

    pub fn is_fp8(self) -> bool {
        matches!(self, DType::E4m3 | DType::E5m2)
    }

    /// The CUDA C++ type that holds one element in generated code.
    pub fn cuda_type(self) -> &'static str {
        match self {
            DType::F32 | DType::Tf32 => "float",
            DType::F16 => "__half",
            DType::Bf16 => "__nv_bfloat16",
            DType::E4m3 => "__nv_fp8_e4m3",
            DType::E5m2 => "__nv_fp8_e5m2",
            DType::I8 => "int8_t",
            DType::I32 => "int32_t",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("bfloat16"), None);
    }
}
