//! Code generation: `(KernelSpec, Plan) → CUDA C++`. Each backend keeps its kernel body as a
//! readable `.cu` template under `kernels/`; Rust fills in the plan's constants and the epilogue.
//!
//! The types here are the contract with the runtime (`deepgemm-cuda`): a generated kernel says
//! which arguments it takes in which order, how many threads and how much shared memory it
//! needs, and how its grid follows from the problem shape.

pub mod space;

use crate::plan::{Plan, Shape};
use crate::spec::ShapeSym;
use serde::{Deserialize, Serialize};

/// A kernel ready for NVRTC, with everything needed to launch it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedKernel {
    /// The `extern "C" __global__` function to launch.
    pub entry: String,
    /// Self-contained CUDA C++ (no headers beyond CUDA's own).
    pub source: String,
    /// The architecture to compile for, e.g. `sm_90a`.
    pub arch: String,
    /// Kernel parameters, in order.
    pub args: Vec<KernelArg>,
    pub threads: u32,
    /// Dynamic shared memory per block, bytes.
    pub smem_bytes: u32,
    pub grid: GridRule,
    /// Scratch memory the launcher must provide through `KernelArg::Workspace`.
    pub workspace: WorkspaceRule,
    /// Global copies need every operand pointer and leading dimension (in bytes) aligned to this
    /// many bytes per operand name; the launcher repacks operands that are not (see `Plan`).
    pub alignment: Vec<(String, u32)>,
    /// The plan the kernel implements.
    pub plan: Plan,
}

/// One kernel parameter. Pointers are `CUdeviceptr`s, leading dimensions `int64` (elements),
/// extents `int32`, params `float`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum KernelArg {
    /// Device pointer to the operand's first element.
    Pointer(String),
    /// Leading dimension of a matrix operand, in elements (row stride for `row`, column stride
    /// for `col`).
    LeadingDim(String),
    Extent(ShapeSym),
    /// A `param` of the spec, as f32.
    Param(String),
    Workspace,
}

/// How the launch grid follows from the shape: `grid.x` = ceil(M/tile_m) * ceil(N/tile_n)
/// (walked in the plan's raster order inside the kernel), `grid.y` = split_k.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridRule {
    pub tile_m: u32,
    pub tile_n: u32,
    pub split_k: u32,
}

impl GridRule {
    pub fn grid(&self, shape: Shape) -> (u32, u32, u32) {
        let tiles_m = shape.m.div_ceil(self.tile_m as u64);
        let tiles_n = shape.n.div_ceil(self.tile_n as u64);
        ((tiles_m * tiles_n) as u32, self.split_k, 1)
    }
}

/// Scratch memory a kernel needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceRule {
    None,
    /// `split_k` f32 partial tiles of M x N, plus one u32 counter per output tile; the launcher
    /// zeroes the counters before each launch.
    SplitK {
        split_k: u32,
    },
}

impl WorkspaceRule {
    pub fn bytes(&self, shape: Shape, grid: &GridRule) -> u64 {
        match *self {
            WorkspaceRule::None => 0,
            WorkspaceRule::SplitK { split_k } => {
                let (tiles, _, _) = grid.grid(shape);
                split_k as u64 * shape.m * shape.n * 4 + tiles as u64 * 4
            }
        }
    }
}
