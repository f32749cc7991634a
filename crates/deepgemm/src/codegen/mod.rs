//! Code generation: `(KernelSpec, Plan) → CUDA C++`. Each backend keeps its kernel body as a
//! readable `.cu` template under `kernels/` and fills in the plan's constants
//! ([`crate::backend`]); the pieces every kernel shares (the argument list, the epilogue functor,
//! the header comment, template rendering) live here.
//!
//! The types here are the contract with the runtime (`deepgemm-cuda`): a generated kernel says
//! which arguments it takes in which order, how many threads and how much shared memory it
//! needs, and how its grid follows from the problem shape.

pub(crate) mod abi;
pub(crate) mod epilogue;
mod render;
pub mod support;

use crate::backend;
use crate::plan::{Backend, Plan, Shape};
use crate::spec::{KernelSpec, ShapeSym};
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
    pub workspace: Workspace,
    /// Global copies need every operand pointer and leading dimension (in bytes) aligned to this
    /// many bytes per operand name; the launcher repacks operands that are not (see `Plan`).
    pub alignment: Vec<(String, u32)>,
    /// Operands the kernel reads in the other layout than the spec declares (fp8 on sm90 reads
    /// K-major only): the launcher transposes each into a workspace before every launch, and
    /// passes the kernel that workspace's address and leading dimension.
    #[serde(default)]
    pub transposed: Vec<String>,
    /// The plan the kernel implements.
    pub plan: Plan,
}

/// Operands the runtime's repack copy kernel moves in one launch (`deepgemm-cuda`'s
/// `kernels/pitch_copy.cu`, `DG_MAX_COPIES`): the model counts one queued launch per this many.
pub const REPACK_COPIES_PER_LAUNCH: u32 = 4;

/// The largest M, N or K a kernel takes (`check` and the launcher refuse more): extents are `int`
/// parameters, and the kernels add up to a tile (at most 256) or a 2-block cluster's worth of
/// rows to them in `int` arithmetic, so 2^16 of headroom below 2^31 keeps every sum in range.
pub const MAX_EXTENT: u64 = (1 << 31) - (1 << 16);

/// The most blocks a launch has: `grid.x` is at most 2^31 - 1 (the search prunes bigger grids).
pub const MAX_GRID_BLOCKS: u64 = i32::MAX as u64;

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
    /// A TMA descriptor of an input (`const __grid_constant__ dg_tensor_map`, 128 bytes), which
    /// the runtime encodes from the operand's address and geometry after any repack.
    TensorMap(TensorMapArg),
}

/// How the runtime encodes one tensor map (`cuTensorMapEncodeTiled`): a 2-D view of the operand
/// with its contiguous dimension first (or, `flat`, a 1-D view of all its elements), the box one
/// TMA load fills, and the smem swizzle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMapArg {
    /// The spec's operand the map reads.
    pub operand: String,
    /// The kernel parameter's name.
    pub param: String,
    /// Box extent along the contiguous dimension, and along the other, in elements.
    pub box_inner: u32,
    pub box_outer: u32,
    /// 32, 64 or 128 (bytes of the swizzle span), 0 for none.
    pub swizzle_bytes: u32,
    /// The kernel uses the map only where the operand's address and pitch are 16-byte aligned,
    /// which it tests itself (D's TMA stores; misaligned rows are stored another way): elsewhere
    /// the launcher passes a zeroed map rather than refusing the operand.
    #[serde(default)]
    pub only_when_aligned: bool,
    /// A 1-D view of the whole (dense) operand, boxes of `box_inner` elements starting on 16
    /// bytes (`box_outer` is 1): fp8 scales, whose rows of a k-tile are consecutive but whose
    /// columns need not be a 16-byte multiple apart (the kernel takes other ways where a box
    /// would not start on 16 bytes).
    #[serde(default)]
    pub flat: bool,
}

/// How the launch grid follows from the shape. One block per output tile: `grid.x` =
/// ceil(M/tile_m) * ceil(N/tile_n) (walked in the plan's raster order inside the kernel),
/// `grid.y` = split_k. Persistent: as many blocks as the rounds of tiles need (at most as many
/// as can be resident at once, in whole clusters), each looping over tiles with a stride of the
/// grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridRule {
    pub tile_m: u32,
    pub tile_n: u32,
    pub split_k: u32,
    pub persistent: bool,
    /// Blocks per cluster along `grid.x` (1 = no cluster; launched with the cluster attribute).
    pub cluster: u32,
}

impl GridRule {
    /// Output tiles of the shape.
    pub fn tiles(&self, shape: Shape) -> u64 {
        shape.m.div_ceil(self.tile_m as u64) * shape.n.div_ceil(self.tile_n as u64)
    }

    /// The launch grid; `resident_clusters` is how many clusters (blocks, without clusters) the
    /// GPU can run at once, which bounds a persistent grid.
    pub fn grid(&self, shape: Shape, resident_clusters: u32) -> (u64, u32, u32) {
        if !self.persistent {
            return (self.tiles(shape), self.split_k, 1);
        }
        // The kernel pairs cluster blocks on vertically adjacent tiles.
        let cluster = self.cluster.max(1) as u64;
        let tiles_m = shape.m.div_ceil(self.tile_m as u64);
        let cluster_tiles = tiles_m.div_ceil(cluster) * shape.n.div_ceil(self.tile_n as u64);
        // As many clusters as the rounds of tiles need: 416 cluster tiles on 66 resident clusters
        // take 7 rounds either way, and 60 clusters run them (measured 0.5-2% faster than 66 on
        // fp8 128x160 tiles, bench/RESULTS.md, 2026-12-06: the idle SMs' power goes to the rest).
        let rounds = cluster_tiles.div_ceil(resident_clusters.max(1) as u64);
        (cluster_tiles.div_ceil(rounds.max(1)) * cluster, 1, 1)
    }
}

/// Scratch memory a kernel needs: consecutive regions of one buffer, each sized from the shape
/// and starting at a multiple of [`Workspace::REGION_ALIGN`] bytes, some zeroed before every
/// launch. The kernel takes one `workspace` pointer (a [`KernelArg::Workspace`]) and finds each
/// region at the offset [`Workspace::layout`] gives; the launcher allocates [`Workspace::bytes`]
/// and zeroes the regions that ask for it, on the launch's stream.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Workspace {
    pub regions: Vec<WorkspaceRegion>,
}

/// One region of a [`Workspace`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRegion {
    /// What it holds, for messages and readers of the metadata (`partials`, `tile_counters`).
    pub name: String,
    pub size: RegionSize,
    /// Zeroed before every launch (the kernel counts into it).
    pub zeroed: bool,
}

/// How a region's size follows from the shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionSize {
    /// `bytes` per element of the M x N output, `copies` times over.
    PerOutputElement { bytes: u32, copies: u32 },
    /// `bytes` per output tile of the kernel's grid rule.
    PerTile { bytes: u32 },
}

/// A region placed in the buffer at one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedRegion {
    pub offset: u64,
    pub bytes: u64,
    pub zeroed: bool,
}

impl Workspace {
    /// Where each region starts: a multiple of this many bytes (what a 16-byte vector access and
    /// the driver's memset want, with room to spare).
    pub const REGION_ALIGN: u64 = 256;

    /// Split-K's layout, declared once for every backend that splits K: `split_k` f32 partial
    /// sums of the M x N output, then one u32 arrival counter per output tile, zeroed before
    /// each launch (the last block of a tile to arrive reduces it).
    pub fn split_k(split_k: u32) -> Workspace {
        Workspace {
            regions: vec![
                WorkspaceRegion {
                    name: "partials".into(),
                    size: RegionSize::PerOutputElement {
                        bytes: 4,
                        copies: split_k,
                    },
                    zeroed: false,
                },
                WorkspaceRegion {
                    name: "tile_counters".into(),
                    size: RegionSize::PerTile { bytes: 4 },
                    zeroed: true,
                },
            ],
        }
    }

    /// Whether the kernel takes a workspace at all.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Each region's offset and size at `shape`. Sizes saturate instead of wrapping: a shape
    /// too large to address is refused by the launcher, which cannot allocate `u64::MAX` bytes.
    pub fn layout(&self, shape: Shape, grid: &GridRule) -> Vec<PlacedRegion> {
        let mut offset = 0u64;
        self.regions
            .iter()
            .map(|region| {
                let bytes = match region.size {
                    RegionSize::PerOutputElement { bytes, copies } => (shape.m)
                        .saturating_mul(shape.n)
                        .saturating_mul(bytes as u64)
                        .saturating_mul(copies as u64),
                    RegionSize::PerTile { bytes } => grid.tiles(shape).saturating_mul(bytes as u64),
                };
                let placed = PlacedRegion {
                    offset,
                    bytes,
                    zeroed: region.zeroed,
                };
                offset = offset
                    .saturating_add(bytes)
                    .saturating_add(Self::REGION_ALIGN - 1)
                    / Self::REGION_ALIGN
                    * Self::REGION_ALIGN;
                placed
            })
            .collect()
    }

    /// Bytes of the whole buffer at `shape`.
    pub fn bytes(&self, shape: Shape, grid: &GridRule) -> u64 {
        self.layout(shape, grid)
            .last()
            .map_or(0, |r| r.offset.saturating_add(r.bytes))
    }
}

/// Why a (spec, plan) pair cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodegenError {
    /// The backend cannot implement this spec or plan.
    #[error("{backend} backend: {reason}")]
    Unsupported { backend: Backend, reason: String },
    /// The epilogue expression or a scale tensor cannot be expressed.
    #[error("epilogue: {0}")]
    Epilogue(String),
    /// A kernel template and its generator disagree (a bug in DeepGEMM).
    #[error("internal error in kernel template {template}: {message}")]
    Template { template: String, message: String },
}

/// Whether `plan` can be generated for `spec`; the error names the first reason it cannot.
pub fn check_supported(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    let backend = plan.backend;
    let view = backend::kernel_view(spec, backend);
    let spec = &*view;
    let fail = |reason: String| Err(CodegenError::Unsupported { backend, reason });
    let implementation = backend::of(backend);
    let tile = plan.tile;
    if tile.m == 0 || tile.n == 0 || tile.k == 0 {
        return fail(format!("empty tile {}x{}x{}", tile.m, tile.n, tile.k));
    }
    if !(1..=8).contains(&plan.raster.group_m) {
        return fail(format!(
            "raster groups of {} tile rows: the tile order takes 1 to 8",
            plan.raster.group_m
        ));
    }
    if plan.split_k != 1 {
        return fail(format!(
            "split_k = {} is not implemented (split_k must be 1)",
            plan.split_k
        ));
    }
    let d = spec.d();
    if let Some(why) = support::output_refusal(d.dtype) {
        return fail(format!("output `{}`: {why}", d.name));
    }
    if let Some(why) = support::accumulate_refusal(spec.a().dtype, spec.accumulate) {
        return fail(why);
    }
    let expected = implementation.smem_layout(spec, tile, &plan.threads, plan.stages);
    if plan.smem != expected {
        return fail(format!(
            "plan.smem {:?} differs from the {backend} backend's smem_layout {:?}",
            plan.smem, expected
        ));
    }
    let limit = spec.hardware.smem_per_block_bytes;
    if plan.smem_bytes() > limit {
        return fail(format!(
            "{} bytes of shared memory exceed the {} limit of {} bytes per block",
            plan.smem_bytes(),
            spec.hardware.name,
            limit
        ));
    }
    implementation.check(spec, plan)?;
    epilogue::epilogue_code(spec)?;
    epilogue::scale_code(spec)?;
    Ok(())
}

/// What the generator writes into one kernel: everything in its source that is not the fixed
/// text of the backend's template or the shared prelude. [`generate`] assembles the source as the
/// header, the prelude, and the template with its `{{NAME}}` placeholders filled from `values`.
#[derive(Debug, Clone)]
pub struct GeneratedParts {
    /// The comment block that opens the kernel: what it computes and how the plan maps onto the
    /// hardware.
    pub header: String,
    /// The backend's template, a file under `kernels/`.
    pub template_name: &'static str,
    /// `{{NAME}}` -> value: the backend's own (tile constants, instruction wrappers), then the
    /// entries every kernel shares (entry point, parameter list, bindings, epilogue, scales).
    pub values: Vec<(&'static str, String)>,
    // What `generate` needs besides the parts to assemble and describe the kernel.
    template: &'static str,
    args: Vec<KernelArg>,
    workspace: Workspace,
}

/// The parts the generator fills into the kernel implementing `plan` for `spec` (see
/// [`generate`], which assembles them).
pub fn generated_parts(
    spec: &KernelSpec,
    plan: &Plan,
    variant_name: &str,
) -> Result<GeneratedParts, CodegenError> {
    check_supported(spec, plan)?;
    let transposed: Vec<String> = backend::transposed_roles(spec, plan.backend)
        .iter()
        .filter_map(|role| spec.by_role(role))
        .map(|o| {
            format!(
                "{}: the launcher transposes it (declared {}) into the K-major layout above",
                o.name,
                format!("{:?}", o.layout).to_lowercase()
            )
        })
        .collect();
    let view = backend::kernel_view(spec, plan.backend);
    let spec = &*view;
    // No backend splits K yet: the kernels take no workspace.
    let workspace = Workspace::default();
    let mut args = abi::kernel_args(spec, &workspace);
    let rendering = backend::of(plan.backend).render(spec, plan)?;
    args.extend(rendering.extra_args);
    let mut values = rendering.values;
    values.extend([
        ("ENTRY", entry_point(spec, variant_name)),
        ("PARAMS", abi::cuda_params(spec, &args)),
        ("BINDINGS", abi::bindings(spec)),
        ("EPILOGUE", epilogue::epilogue_code(spec)?),
        ("SCALES", epilogue::scale_code(spec)?),
    ]);
    let described: Vec<String> = transposed.into_iter().chain(rendering.described).collect();
    Ok(GeneratedParts {
        header: header(spec, plan, variant_name, &args, &described),
        template_name: rendering.template_name,
        values,
        template: rendering.template,
        args,
        workspace,
    })
}

/// The `extern "C"` name of the kernel: the spec's name and the variant's, as C identifiers.
fn entry_point(spec: &KernelSpec, variant_name: &str) -> String {
    format!(
        "deepgemm_{}_{}",
        abi::ident(&spec.name),
        abi::ident(variant_name)
    )
}

/// Generates the CUDA C++ kernel implementing `plan` for `spec`. `variant_name` (e.g. `v0`)
/// becomes part of the entry point's name.
pub fn generate(
    spec: &KernelSpec,
    plan: &Plan,
    variant_name: &str,
) -> Result<GeneratedKernel, CodegenError> {
    let parts = generated_parts(spec, plan, variant_name)?;
    let transposed = backend::transposed_roles(spec, plan.backend)
        .iter()
        .filter_map(|role| spec.by_role(role).map(|o| o.name.clone()))
        .collect();
    let body = render::render(parts.template_name, parts.template, &parts.values)?;
    let source = format!("{}\n{}\n{}", parts.header, PRELUDE, body);
    let alignment = spec
        .operands
        .iter()
        .map(|o| {
            let bytes = backend::of(plan.backend).operand_alignment(spec, plan, o);
            (o.name.clone(), bytes)
        })
        .collect();
    Ok(GeneratedKernel {
        entry: entry_point(spec, variant_name),
        source,
        arch: spec.hardware.arch.clone(),
        args: parts.args,
        threads: plan.threads.threads(),
        smem_bytes: plan.smem_bytes(),
        grid: GridRule {
            tile_m: plan.tile.m,
            tile_n: plan.tile.n,
            split_k: plan.split_k,
            persistent: plan.persistent,
            cluster: plan.cluster_m * plan.cluster_n,
        },
        workspace: parts.workspace,
        alignment,
        transposed,
        plan: plan.clone(),
    })
}

/// Element types, conversions and epilogue functions shared by every backend.
const PRELUDE: &str = include_str!("../../kernels/prelude.cuh");

/// `dg_bytes_from`, 16 bytes at any byte offset of two aligned 16-byte words: the sm90
/// template's `{{BYTES_FROM}}` and the start of the repack copy kernel (deepgemm-cuda's pitch_copy).
pub const BYTES_FROM_CUH: &str = include_str!("../../kernels/bytes.cuh");

/// The cp.async wrappers (sm_80 and later): the sm80 and gemv templates' `{{CP_ASYNC}}`.
pub const CP_ASYNC_CUH: &str = include_str!("../../kernels/cp_async.cuh");

/// The mbarrier and bulk-copy wrappers (sm_90 and later): the sm90 and gemv templates'
/// `{{MBARRIER}}` (gemv's sm_80 plans include it and never call it).
pub const MBARRIER_CUH: &str = include_str!("../../kernels/mbarrier.cuh");

/// The comment block that opens every generated kernel: what it computes and how the plan
/// maps onto the hardware.
fn header(
    spec: &KernelSpec,
    plan: &Plan,
    variant_name: &str,
    args: &[KernelArg],
    described: &[String],
) -> String {
    let operand_text = |o: &crate::spec::Operand| {
        let dims: Vec<String> = o
            .dims
            .iter()
            .map(|d| match d {
                crate::spec::Dim::Sym(s) => format!("{s:?}"),
                crate::spec::Dim::Lit(v) => v.to_string(),
                crate::spec::Dim::CeilDiv(s, b) => format!("{s:?}/{b}"),
            })
            .collect();
        let layout = if abi::is_matrix(o) {
            format!(" {:?}", o.layout).to_lowercase()
        } else {
            String::new()
        };
        format!(
            "{} {}: {}[{}]{layout}",
            match o.direction {
                crate::spec::Direction::Input => "input",
                crate::spec::Direction::Output => "output",
            },
            o.name,
            o.dtype,
            dims.join(", ")
        )
    };
    let arg_names: Vec<String> = args
        .iter()
        .map(|a| match a {
            KernelArg::Pointer(n) => n.clone(),
            KernelArg::LeadingDim(n) => format!("ld({n})"),
            KernelArg::Extent(s) => format!("{s:?}"),
            KernelArg::Param(n) => n.clone(),
            KernelArg::Workspace => "workspace".to_string(),
            KernelArg::TensorMap(map) => format!(
                "{} (TMA map of {}, box {}x{})",
                map.param, map.operand, map.box_inner, map.box_outer
            ),
        })
        .collect();
    let mut lines = vec![
        "Generated by DeepGEMM. Do not edit: change the spec or the plan instead.".to_string(),
        format!(
            "kernel {} / variant {} for {} ({})",
            spec.name, variant_name, spec.hardware.name, spec.hardware.arch
        ),
        format!("plan: {}", plan.label()),
    ];
    lines.extend(spec.operands.iter().map(operand_text));
    lines.push(format!("accumulate {}", spec.accumulate));
    lines.push(format!(
        "epilogue: {} = {}",
        spec.epilogue.output,
        epilogue::dgml_expr(&spec.epilogue.expr)
    ));
    lines.extend(described.iter().cloned());
    lines.push(if plan.persistent {
        format!(
            "grid.x = as many blocks as the rounds of tiles need (at most one per SM); ceil(M/{}) * \
             ceil(N/{}) output tiles walked with a stride of the grid, in groups of {} tile rows",
            plan.tile.m,
            plan.tile.n,
            plan.raster.group_m.max(1)
        )
    } else {
        format!(
            "grid.x = ceil(M/{}) * ceil(N/{}) output tiles, walked in groups of {} tile rows",
            plan.tile.m,
            plan.tile.n,
            plan.raster.group_m.max(1)
        )
    });
    lines.push(format!("arguments: {}", arg_names.join(", ")));
    lines
        .iter()
        .map(|l| format!("// {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
