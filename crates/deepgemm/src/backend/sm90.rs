//! The sm90 backend: TMA loads into an mbarrier ring, wgmma from swizzled shared memory, a
//! producer warpgroup and one or two consumer warpgroups, a persistent grid and optional 2-block
//! clusters that multicast B (`kernels/sm90_gemm.cu`). Hopper only (`sm_90a`).

use super::{
    base_plan, push_variants, require_unscaled_f32_accumulation, tensor_core_dtype_refusal,
    unsupported, BackendImpl, PlanSettings, Rendering,
};
use crate::codegen::abi::element_type;
use crate::codegen::{epilogue, CodegenError, KernelArg, TensorMapArg};
use crate::dtype::DType;
use crate::hw::{BackendCalibration, Calibration, Hardware};
use crate::model::sync::BarrierKind;
use crate::plan::{
    Backend, EpilogueStrategy, OperandPath, Plan, RecordedWarps, SmemLayout, SmemSwizzle,
    ThreadLayout, Tile,
};
use crate::spec::{Dim, KernelSpec, Layout, Operand, Role, ShapeSym};

const TEMPLATE: &str = include_str!("../../kernels/sm90_gemm.cu");

/// The deepest ring proposed (the kernel takes up to [`MAX_STAGES`]). Narrow tiles are load-latency
/// bound where few tiles cover the problem (3001x7x3001: 47 tiles of 64x8), and bytes in flight
/// per SM are what a deeper ring adds; beyond about 32 stages no tile is that narrow.
const MAX_PROPOSED_STAGES: u32 = 32;

/// K elements per stage: one 128-byte row of the 128-byte swizzle.
pub const TILE_K_BYTES: u32 = 128;
/// The swizzle repeats every 8 rows of 128 bytes; stages and TMA boxes start on this boundary.
const SWIZZLE_ATOM_BYTES: u32 = 1024;
/// Elements of an MN-major operand per TMA box (one 128-byte swizzle row).
const MN_BOX_ELEMS: u32 = 64;
/// Bytes reserved after the stages: slack to round the dynamic shared memory up to 1024 bytes,
/// then 1 KiB of mbarriers (full and empty per stage, two ping-pong turns; 8 bytes each).
const BARRIER_BYTES: u32 = SWIZZLE_ATOM_BYTES + 1024;
/// The most stages whose barriers fit their 1 KiB.
const MAX_STAGES: u32 = (1024 / 8 - 2) / 2;
/// Accumulator registers per consumer thread beyond which the consumers would spill or run
/// slower. ptxas gives the code after `setmaxnreg.inc` the consumers' 232 registers (not the
/// launch's even share of 168), of which the rest of the main loop and the epilogue take up to
/// about 40: fp8 64x192 per consumer (96 sums + 96 partial sums) compiles without local memory
/// with 128x128 block scales, whose tile then meets two blocks of B's scales, and with its
/// epilogue deferred into the next tile's first k-tile (NVRTC 13.0); 64x176 spills there (it
/// meets three blocks, so it keeps a scale per column). The wider fp8 tiles measured faster only
/// when two consumers split a tile (4096x7168x16384: 128x160 1136 TFLOP/s, 128x128 989); in
/// ping-pong every 64x136..64x160 plan the model preferred measured 9-18% slower than its 64x128
/// neighbour (bench/RESULTS.md, 3dea5fe), so ping-pong and 16-bit kernels keep the limit all
/// earlier measurements had, and so do kernels that keep a B scale per fragment column
/// (TILE_N / 4 registers per k-tile, twice: 128x160 spills). A consumer of two m64 slices
/// (256-row cooperative fp8 tiles) keeps one slice of partial sums: 256x128 holds 128 sums + 64
/// partial sums, DeepSeek's DeepGEMM's tile for 4096x4096 (4 rounds of 132 SMs where 128x160
/// takes 6.3 run as 7): 201 us against 128x160's 233 at 4096x4096x7168 block-scaled
/// (bench/RESULTS.md, 2026-12-06).
fn max_accumulators(spec: &KernelSpec, pingpong: bool, tile_n: u32) -> u32 {
    if promotes(spec) && !pingpong && col_scales(spec, tile_n) != ColScales::PerColumn {
        192
    } else {
        128
    }
}
/// Global strides and base addresses TMA can read: multiples of 16 bytes.
pub const TMA_ALIGNMENT_BYTES: u32 = 16;

fn fail(reason: String) -> CodegenError {
    unsupported(Backend::Sm90, reason)
}

/// Consumer warps' rows and columns per staged-epilogue chunk (the kernel's `EPI_N`).
const EPILOGUE_ROWS_PER_WARP: u32 = 16;
const EPILOGUE_CHUNK_COLS: u32 = 64;

/// Row-major 16-bit D leaves its per-warp buffers by TMA stores where D's address and pitch are
/// 16-byte aligned (the kernel tests it at run time): a staged 16 x 64 piece is 128-byte rows, the
/// 128-byte swizzle the buffer already has. (f32 and fp8 rows are 256 and 64 bytes: stored by the
/// threads.) A warp has two buffers where they fit beside the ring (it stages its next piece while
/// the copy engine reads the last), else one (a 128 x 192 tile at five stages), and waits for the
/// copy engine before reusing it. Threads' stores read the buffer back before the next piece:
/// they use one.
fn stores_d_by_tma(spec: &KernelSpec) -> bool {
    epilogue_strategy(spec) == EpilogueStrategy::ViaSmem && spec.d().dtype.size_bytes() == 2
}

/// Row-major D is written through a per-warp shared-memory buffer, so that stores are whole
/// 16-byte pieces of rows; column-major D is stored straight from the accumulators.
fn epilogue_strategy(spec: &KernelSpec) -> EpilogueStrategy {
    match spec.d().layout {
        Layout::Row => EpilogueStrategy::ViaSmem,
        Layout::Col => EpilogueStrategy::Direct,
    }
}

/// The warpgroups that do the math.
fn consumer_warpgroups(threads: &ThreadLayout) -> u32 {
    threads.math_threads() / 128
}

/// The shared-memory layout of a tile at `stages` stages: dense, 128-byte swizzled stages (no
/// padding), then the barriers, then the consumer warps' staged-epilogue buffers, then each
/// stage's fp8 K-block scales.
fn smem_layout(spec: &KernelSpec, tile: Tile, threads: &ThreadLayout, stages: u32) -> SmemLayout {
    let consumers = consumer_warpgroups(threads);
    let scale_stage_bytes = staged_scales(spec, tile.m, tile.n).map_or(0, ScaleSlots::stage_bytes);
    let e = spec.a().dtype.size_bytes();
    let mut layout = SmemLayout {
        a_stage_bytes: tile.m * tile.k * e,
        b_stage_bytes: tile.n * tile.k * e,
        epilogue_bytes: 0,
        epilogue_buffers: 0,
        barrier_bytes: BARRIER_BYTES,
        scale_stage_bytes,
        swizzle: SmemSwizzle::XorChunks,
    };
    if epilogue_strategy(spec) == EpilogueStrategy::ViaSmem {
        // One buffer per consumer warp: 16 rows of 64 elements of D.
        let buffers_bytes = 4
            * consumers
            * EPILOGUE_ROWS_PER_WARP
            * EPILOGUE_CHUNK_COLS
            * spec.d().dtype.size_bytes();
        let two_fit =
            layout.total_bytes(stages) + 2 * buffers_bytes <= spec.hardware.smem_per_block_bytes;
        layout.epilogue_buffers = match (stores_d_by_tma(spec), two_fit) {
            (true, true) => 2,
            (true, false) => 1,
            (false, _) => 0,
        };
        layout.epilogue_bytes = warp_buffers(&layout) * buffers_bytes;
    }
    layout
}

/// Staged-epilogue buffers per consumer warp in the kernel (`EPI_WARP_BUFFERS`): the layout's
/// TMA-store buffers, and one where the threads store D.
fn warp_buffers(layout: &SmemLayout) -> u32 {
    layout.epilogue_buffers.max(1)
}

/// How many K-block scales of B a consumer thread needs per k-tile, and why (the kernel's
/// `COL_SCALES` and `PER_COLUMN_SCALES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColScales {
    /// The tile lies in one block of scale columns (or B has no K-block scale).
    One,
    /// The tile meets at most two blocks, each 8-column group of the fragment lying in one.
    TwoBlocks,
    /// Every fragment column (TILE_N / 4 of them per thread) has its own.
    PerColumn,
}

impl ColScales {
    fn per_thread(self, tile_n: u32) -> u32 {
        match self {
            ColScales::One => 1,
            ColScales::TwoBlocks => 2,
            ColScales::PerColumn => tile_n / 4,
        }
    }
}

/// Tiles start on multiples of TILE_N, so when TILE_N divides the scale block (128 columns) a tile
/// lies in one block. A tile starts at most `block - gcd(TILE_N, block)` columns into a block, so
/// when TILE_N is at most `block + gcd` (112, 160, 192 or 256 against 128) and the block is a
/// multiple of 8 it meets at most two. Otherwise (a scale per column of B) each column has its own.
fn col_scales(spec: &KernelSpec, tile_n: u32) -> ColScales {
    let block = b_block_scale_columns(spec);
    let n = u64::from(tile_n);
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    if block == 0 || block.is_multiple_of(n) {
        ColScales::One
    } else if block.is_multiple_of(8) && n <= block + gcd(n, block) {
        ColScales::TwoBlocks
    } else {
        ColScales::PerColumn
    }
}

/// Shared-memory slots (f32) per stage for staged K-block scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleSlots {
    /// A's scales of the tile's rows (0 when A has no K-block scale).
    pub rows: u32,
    /// B's scales of the tile's (at most two) blocks of columns, padded to 16 bytes (0 when B
    /// has none).
    pub cols: u32,
    /// A's scales of a k-tile are contiguous (an M-major scale tensor), so one TMA load brings
    /// the tile's rows (the kernel's `A_SCALES_BY_TMA`) where M is a multiple of 4 (a box starts
    /// on 16 bytes); otherwise the producer warp's lanes copy them row by row.
    pub rows_by_tma: bool,
}

/// Shared-memory alignment of a TMA load's destination that the scale slots keep.
const TMA_SMEM_ALIGNMENT_BYTES: u32 = 128;

impl ScaleSlots {
    /// Bytes of one stage's slot: rounded up so that every slot starts where a TMA load may
    /// write when A's scales come by TMA.
    pub fn stage_bytes(self) -> u32 {
        let bytes = 4 * (self.rows + self.cols);
        if self.rows_by_tma {
            bytes.next_multiple_of(TMA_SMEM_ALIGNMENT_BYTES)
        } else {
            bytes
        }
    }
}

/// The kernel parameter of the tensor map over A's K-block scales.
const A_SCALE_MAP_PARAM: &str = "tmap_a_scales";

/// A's K-block scale tensor where the kernel loads it by TMA (`ScaleSlots::rows_by_tma`).
fn tma_a_scales<'a>(spec: &'a KernelSpec, plan: &Plan) -> Option<&'a Operand> {
    staged_scales(spec, plan.tile.m, plan.tile.n)
        .filter(|slots| slots.rows_by_tma)
        .and_then(|_| k_block_scales(spec, spec.a()).into_iter().next())
}

/// Whether a scale tensor's consecutive elements are consecutive rows of A: `[M, K/b] col` or
/// `[K/b, M] row` (DeepSeek's "TMA-aligned" layout of the activations' 1x128 scales).
fn m_major(scale: &Operand) -> bool {
    let contiguous = match (scale.dims.as_slice(), scale.layout) {
        ([first, _], Layout::Col) => first,
        ([_, last], Layout::Row) => last,
        _ => return false,
    };
    *contiguous == Dim::Sym(ShapeSym::M)
}

/// The K-block scale tensors of an operand (those indexed by K / block).
fn k_block_scales<'a>(spec: &'a KernelSpec, operand: &Operand) -> Vec<&'a Operand> {
    epilogue::scales_of(spec, operand)
        .into_iter()
        .filter(|s| {
            s.dims
                .iter()
                .any(|d| matches!(d, Dim::CeilDiv(ShapeSym::K, _)))
        })
        .collect()
}

/// Whether fp8 K-block scales are staged through shared memory: each k-tile's scales of the
/// tile's rows and columns go into a slot beside the k-tile's stage, arriving on the stage's
/// `full` barrier, and the consumers read them from there when they promote the k-tile. A's come
/// by one TMA load where they are M-major ([`m_major`]) and M is a multiple of 4, else the
/// producer warp's lanes copy them row by row (`cp.async`); B's (one or two per k-tile) are
/// copied by two lanes. The
/// consumers then spend no instructions on copying them (bench/RESULTS.md, 2026-12-04); a
/// register load by the consumers instead would make the promotion wait for the newest loads in
/// flight (the hardware tracks a thread's outstanding loads by counters, not one by one), an L2
/// round trip per k-tile. Staged: each operand has at most one K-block scale tensor, in f32, and a
/// tile meets at most two blocks of B's scale columns (`col_scales`); otherwise (a product of
/// scale tensors, another dtype, a scale per column of B) the consumers load the scales into
/// registers one k-tile ahead.
pub fn staged_scales(spec: &KernelSpec, tile_m: u32, tile_n: u32) -> Option<ScaleSlots> {
    if !promotes(spec) {
        return None;
    }
    let (a, b) = (
        k_block_scales(spec, spec.a()),
        k_block_scales(spec, spec.b()),
    );
    let stageable =
        |scales: &[&Operand]| scales.len() <= 1 && scales.iter().all(|s| s.dtype == DType::F32);
    if (a.is_empty() && b.is_empty()) || !stageable(&a) || !stageable(&b) {
        return None;
    }
    if !b.is_empty() && col_scales(spec, tile_n) == ColScales::PerColumn {
        return None;
    }
    let cols = if b.is_empty() { 0 } else { 4 };
    let rows = if a.is_empty() { 0 } else { tile_m };
    Some(ScaleSlots {
        rows,
        cols,
        rows_by_tma: a.first().is_some_and(|s| m_major(s)),
    })
}

/// The producer's registers where the hardware file does not say.
const DEFAULT_PRODUCER_REGS: u32 = 40;
/// Registers a consumer thread keeps for addresses, loop counters and predicates (the hardware
/// file's `calibration.backends.sm90.address_regs`): fewer than sm80's 40, as the wgmma
/// descriptors, the barrier addresses and the tile loop live in uniform registers. 32 is what
/// ptxas leaves beside [`max_accumulators`]' widest fp8 consumer with a deferred epilogue.
const DEFAULT_ADDRESS_REGS: u32 = 32;

/// Registers the producer warpgroup keeps after `setmaxnreg.dec`: the hardware file's
/// `calibration.backends.sm90.producer_regs`, the one figure the kernel and the model's register
/// layer share.
fn producer_registers(hw: &Hardware) -> u32 {
    hw.calibration
        .backends
        .get(Backend::Sm90)
        .producer_regs
        .unwrap_or(DEFAULT_PRODUCER_REGS)
}

/// The registers a block of `threads` holds from its launch (one block per SM): each thread gets
/// what the register file allows, in multiples of 8, at most the per-thread limit. `setmaxnreg`
/// only moves registers within this pool, and an increase asking for more than the other
/// warpgroups gave back waits for ever: 384 threads launch with 168 each, 64,512 in all, not the
/// file's 65,536 (a 64-register producer with 224-register consumers hung on the H200).
fn register_pool(threads: u32, hw: &Hardware) -> u32 {
    let per_thread = (hw.regs_per_sm / threads.max(1)).min(hw.max_regs_per_thread) / 8 * 8;
    per_thread * threads
}

/// Registers each consumer thread may use after `setmaxnreg.inc`: what the block's
/// [`register_pool`] leaves once the producer warpgroup is down to [`producer_registers`], in
/// multiples of 8, at most 240.
pub fn consumer_registers(consumers: u32, hw: &Hardware) -> u32 {
    let consumers = consumers.max(1);
    let left =
        register_pool(128 * (1 + consumers), hw).saturating_sub(128 * producer_registers(hw));
    (left / (128 * consumers) / 8 * 8).min(240)
}

/// Whether a tile's epilogue runs once the next tile's first k-tile of wgmmas has been issued,
/// so that the tensor cores work through it (the kernel's DEFERRED_EPILOGUE): cooperative fp8
/// kernels, whose wgmmas write the partial sums while the epilogue reads the sums, with D staged
/// through shared memory. (Ping-pong hides its epilogues anyway; column-major D, stored from the
/// registers, spilled with the partial sums live: 256x80 with a bias and a per-row amax.)
fn defers_epilogue(plan: &Plan, input_bytes: u32) -> bool {
    input_bytes == 1
        && !plan.threads.pingpong()
        && plan.epilogue == EpilogueStrategy::ViaSmem
        && plan.tile.m * 128 / plan.threads.tile_threads().max(1) <= 64
}

/// Whether the kernel sums each k-tile's products apart and promotes them into the f32
/// accumulators (two-level accumulation): fp8 wgmma adds in limited precision, and a K-block
/// scale can only be applied to a k-tile's partial sums.
pub fn promotes(spec: &KernelSpec) -> bool {
    spec.a().dtype.is_fp8()
}

/// f32 registers per consumer thread that hold one m64 slice's partial sums of a k-tile (a
/// consumer's slices take turns with them): an m64 x tile_n wgmma result over 128 threads.
fn partial_sum_registers(tile_n: u32) -> u32 {
    tile_n / 2
}

/// f32 registers per consumer thread that hold results: `wg_m x tile_n` sums over 128 threads,
/// and when the kernel promotes the partial sums too.
pub fn accumulator_registers(spec: &KernelSpec, wg_m: u32, tile_n: u32) -> u32 {
    wg_m * tile_n / 128
        + if promotes(spec) {
            partial_sum_registers(tile_n)
        } else {
            0
        }
}

/// wgmma reads tf32 operands K-major only (its transpose bits are for 16-bit types) and the
/// launcher's transpose moves 1-byte elements: an M-major A or N-major B of tf32 runs on sm80,
/// whose mma.sync fragments are loaded in any layout.
fn tf32_layout_refusal(spec: &KernelSpec) -> Option<String> {
    if spec.a().dtype != DType::Tf32 {
        return None;
    }
    let wrong: Vec<String> = [(Role::A, spec.a(), "row"), (Role::B, spec.b(), "col")]
        .into_iter()
        .filter(|(role, ..)| !is_k_major(spec, role.clone()))
        .map(|(_, operand, want)| format!("`{}` is not `{want}`", operand.name))
        .collect();
    (!wrong.is_empty()).then(|| {
        format!(
            "wgmma reads tf32 operands K-major only (A `row`, B `col`) and {}; sm80's mma.sync \
             takes any layout",
            wrong.join(" and ")
        )
    })
}

fn is_k_major(spec: &KernelSpec, role: Role) -> bool {
    match role {
        Role::A => spec.a().layout == Layout::Row,
        _ => spec.b().layout == Layout::Col,
    }
}

fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    let hw = &spec.hardware;
    if !(hw.features.wgmma && hw.features.tma) || hw.compute_capability() != 90 {
        return Err(fail(format!(
            "needs wgmma and TMA (sm_90a); target {} is {}",
            hw.name, hw.arch
        )));
    }
    let producer = producer_registers(hw);
    if !(24..=256).contains(&producer) || !producer.is_multiple_of(8) {
        return Err(fail(format!(
            "calibration.backends.sm90.producer_regs = {producer}: setmaxnreg takes a multiple \
             of 8 in 24..=256"
        )));
    }
    let (a, b) = (spec.a(), spec.b());
    let sixteen_bit = a.dtype == b.dtype && matches!(a.dtype, DType::F16 | DType::Bf16);
    let tf32 = a.dtype == DType::Tf32 && b.dtype == DType::Tf32;
    if !(sixteen_bit || tf32 || a.dtype.is_fp8() && b.dtype.is_fp8()) {
        return Err(fail(format!(
            "inputs {} x {}: this generator takes f16, bf16 or tf32 for both, or fp8 (e4m3, \
             e5m2) for both",
            a.dtype, b.dtype
        )));
    }
    if let Some(why) = tf32_layout_refusal(spec) {
        return Err(fail(why));
    }
    if promotes(spec) {
        // wgmma reads 8-bit operands K-major only (no transpose bit for them): the launcher
        // transposes the others (`transposes`), and this is the kernel's view of the spec.
        for (role, operand) in [(Role::A, a), (Role::B, b)] {
            if !is_k_major(spec, role) {
                return Err(CodegenError::Template {
                    template: "sm90_gemm.cu".into(),
                    message: format!(
                        "fp8 operand `{}` reached the generator M/N-major (the launcher \
                         transposes it: generate from backend::kernel_view)",
                        operand.name
                    ),
                });
            }
        }
        if spec.accumulate != DType::F32 {
            return Err(fail(format!(
                "accumulate {} is not supported (fp8 products are promoted into f32)",
                spec.accumulate
            )));
        }
        epilogue::split_scale_code(spec, plan.tile.k)?;
    } else {
        require_unscaled_f32_accumulation(Backend::Sm90, spec, "wgmma")?;
    }
    let tile = plan.tile;
    if tile.k * a.dtype.size_bytes() != TILE_K_BYTES {
        return Err(fail(format!(
            "TILE_K = {} must fill one 128-byte swizzle row ({} elements)",
            tile.k,
            TILE_K_BYTES / a.dtype.size_bytes()
        )));
    }
    let schedule = match plan.threads {
        ThreadLayout::Warpgroups { consumers, split_m }
            if (1..=2).contains(&consumers) && (split_m == 1 || split_m == consumers) =>
        {
            Some(split_m)
        }
        _ => None,
    };
    let Some(splitting) = schedule else {
        return Err(fail(format!(
            "the kernel runs one producer and 1 or 2 consumer warpgroups, which split each tile \
             along M (cooperative) or take whole tiles in turn (ping-pong); the plan has {:?}",
            plan.threads
        )));
    };
    let wg_m = tile.m / splitting;
    if !tile.m.is_multiple_of(splitting) || !wg_m.is_multiple_of(64) || wg_m > 128 {
        return Err(fail(format!(
            "TILE_M = {} over {splitting} consumer(s) must give 64 or 128 rows each (wgmma is \
             m64; more would not fit the accumulators)",
            tile.m
        )));
    }
    if !tile.n.is_multiple_of(8) || tile.n == 0 || tile.n > 256 {
        return Err(fail(format!(
            "TILE_N = {} must be a multiple of 8 up to 256 (wgmma n)",
            tile.n
        )));
    }
    let accumulators = accumulator_registers(spec, wg_m, tile.n);
    let max_accumulators = max_accumulators(spec, plan.threads.pingpong(), tile.n);
    if accumulators > max_accumulators {
        return Err(fail(format!(
            "{wg_m}x{} rows per consumer need {accumulators} accumulator registers per thread{}; \
             at most {max_accumulators}",
            tile.n,
            if promotes(spec) {
                " (the sums and one m64 slice's fp8 partial sums)"
            } else {
                ""
            }
        )));
    }
    if !(2..=MAX_STAGES).contains(&plan.stages) {
        return Err(fail(format!(
            "the TMA ring takes 2 to {MAX_STAGES} stages (its barriers share 1 KiB), got {}",
            plan.stages
        )));
    }
    if plan.epilogue != epilogue_strategy(spec) {
        return Err(fail(format!(
            "a {} D is stored {:?}, the plan says {:?}",
            format!("{:?}", spec.d().layout).to_lowercase(),
            epilogue_strategy(spec),
            plan.epilogue
        )));
    }
    if !plan.persistent {
        return Err(fail("the sm90 kernel is persistent".to_string()));
    }
    let cluster = plan.cluster_m;
    if plan.cluster_n != 1 || !(1..=2).contains(&cluster) {
        return Err(fail(format!(
            "clusters are 1x1 or 2x1 (blocks along M share B); the plan has {}x{}",
            plan.cluster_m, plan.cluster_n
        )));
    }
    if cluster > 1 && !hw.features.clusters {
        return Err(fail(format!("{} has no thread-block clusters", hw.name)));
    }
    let b_share_ok = if is_k_major(spec, Role::B) {
        (tile.n / cluster).is_multiple_of(8)
    } else {
        tile.n.is_multiple_of(MN_BOX_ELEMS * cluster)
    };
    if !b_share_ok {
        return Err(fail(format!(
            "TILE_N = {} cannot be split into {cluster} shares of B that start on a swizzle atom \
             ({})",
            tile.n,
            if is_k_major(spec, Role::B) {
                "8-row multiples when K-major"
            } else {
                "64-column boxes when N-major"
            }
        )));
    }
    if plan.operands.a_copy_bytes != TMA_ALIGNMENT_BYTES
        || plan.operands.b_copy_bytes != TMA_ALIGNMENT_BYTES
        || !plan.operands.repack_misaligned
    {
        return Err(fail(format!(
            "TMA reads 16-byte aligned rows: operands must declare 16-byte copies and repack \
             misaligned inputs (plan: {:?})",
            plan.operands
        )));
    }
    Ok(())
}

/// The tensor maps the kernel takes (after its other arguments): one per input, with the box
/// one TMA load fills.
fn tensor_maps(spec: &KernelSpec, plan: &Plan) -> Vec<TensorMapArg> {
    let (tile, cluster) = (plan.tile, plan.cluster_m);
    let a_box = if is_k_major(spec, Role::A) {
        (tile.k, tile.m)
    } else {
        (MN_BOX_ELEMS, tile.k)
    };
    let b_box = if is_k_major(spec, Role::B) {
        (tile.k, tile.n / cluster)
    } else {
        (MN_BOX_ELEMS, tile.k)
    };
    let mut maps: Vec<TensorMapArg> = [(spec.a(), "tmap_a", a_box), (spec.b(), "tmap_b", b_box)]
        .into_iter()
        .map(|(operand, param, (inner, outer))| TensorMapArg {
            operand: operand.name.clone(),
            param: param.to_string(),
            box_inner: inner,
            box_outer: outer,
            swizzle_bytes: TILE_K_BYTES,
            only_when_aligned: false,
            flat: false,
        })
        .collect();
    if stores_d_by_tma(spec) {
        // One warp's staged piece: 16 rows of 64 elements (128 bytes, swizzled as the buffer).
        maps.push(TensorMapArg {
            operand: spec.d().name.clone(),
            param: "tmap_d".to_string(),
            box_inner: EPILOGUE_CHUNK_COLS,
            box_outer: EPILOGUE_ROWS_PER_WARP,
            swizzle_bytes: EPILOGUE_CHUNK_COLS * 2,
            only_when_aligned: true,
            flat: false,
        });
    }
    if let Some(scale) = tma_a_scales(spec, plan) {
        // A k-tile's scales of the tile's rows: TILE_M consecutive floats from a multiple of 4
        // (the kernel uses the map where M is one; rows past M read the next k block's or zeros,
        // and their sums are never stored).
        maps.push(TensorMapArg {
            operand: scale.name.clone(),
            param: A_SCALE_MAP_PARAM.to_string(),
            box_inner: tile.m,
            box_outer: 1,
            swizzle_bytes: 0,
            only_when_aligned: false,
            flat: true,
        });
    }
    maps
}

fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let input = spec.a().dtype;
    let consumers = consumer_warpgroups(&plan.threads);
    let staged = staged_scales(spec, plan.tile.m, plan.tile.n);
    let b_scales = col_scales(spec, plan.tile.n);
    vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("STAGES", plan.stages.to_string()),
        ("CONSUMERS", consumers.to_string()),
        ("PINGPONG", plan.threads.pingpong().to_string()),
        ("CLUSTER_M", plan.cluster_m.to_string()),
        ("GROUP_M", plan.raster.group_m.max(1).to_string()),
        ("A_KMAJOR", is_k_major(spec, Role::A).to_string()),
        ("B_KMAJOR", is_k_major(spec, Role::B).to_string()),
        ("D_ROW", (spec.d().layout == Layout::Row).to_string()),
        ("A_TYPE", element_type(input).to_string()),
        ("B_TYPE", element_type(spec.b().dtype).to_string()),
        ("PROMOTE", promotes(spec).to_string()),
        (
            "DEFERRED_EPILOGUE",
            defers_epilogue(plan, input.size_bytes()).to_string(),
        ),
        ("B_SCALE_COLUMNS", b_block_scale_columns(spec).to_string()),
        ("COL_SCALES", b_scales.per_thread(plan.tile.n).to_string()),
        (
            "PER_COLUMN_SCALES",
            (b_scales == ColScales::PerColumn).to_string(),
        ),
        ("STAGED_SCALES", staged.is_some().to_string()),
        ("SCALE_ROWS", staged.map_or(0, |s| s.rows).to_string()),
        ("SCALE_COLS", staged.map_or(0, |s| s.cols).to_string()),
        (
            "A_SCALES_BY_TMA",
            staged.is_some_and(|s| s.rows_by_tma).to_string(),
        ),
        (
            "A_SCALE_MAP",
            if staged.is_some_and(|s| s.rows_by_tma) {
                format!("&{A_SCALE_MAP_PARAM}")
            } else {
                "nullptr".to_string()
            },
        ),
        (
            "SCALE_BYTES",
            (plan.stages * plan.smem.scale_stage_bytes).to_string(),
        ),
        ("D_TYPE", element_type(spec.d().dtype).to_string()),
        (
            "STAGED_EPILOGUE",
            (plan.epilogue == EpilogueStrategy::ViaSmem).to_string(),
        ),
        ("EPILOGUE_BYTES", plan.smem.epilogue_bytes.to_string()),
        ("TMA_STORE", stores_d_by_tma(spec).to_string()),
        ("EPI_WARP_BUFFERS", warp_buffers(&plan.smem).to_string()),
        (
            "D_STORE_MAP",
            if stores_d_by_tma(spec) {
                "&tmap_d"
            } else {
                "nullptr"
            }
            .to_string(),
        ),
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
        (
            "CONSUMER_REGISTERS",
            consumer_registers(consumers, &spec.hardware).to_string(),
        ),
        (
            "PRODUCER_REGISTERS",
            producer_registers(&spec.hardware).to_string(),
        ),
        ("WGMMA", wgmma_wrapper(spec, plan.tile.n)),
        ("BYTES_FROM", crate::codegen::BYTES_FROM_CUH.to_string()),
        ("MBARRIER", crate::codegen::MBARRIER_CUH.to_string()),
    ]
}

/// Columns of D that share one K-block scale of B (`B_SCALE_COLUMNS`): 128 for `[N/128, K/128]`
/// scales, 0 when B has no K-block scale.
fn b_block_scale_columns(spec: &KernelSpec) -> u64 {
    epilogue::scales_of(spec, spec.b())
        .iter()
        .filter(|s| {
            s.dims
                .iter()
                .any(|d| matches!(d, Dim::CeilDiv(ShapeSym::K, _)))
        })
        .find_map(|s| {
            s.dims.iter().find_map(|d| match d {
                Dim::CeilDiv(ShapeSym::N, block) => Some(*block),
                Dim::Sym(ShapeSym::N) => Some(1),
                _ => None,
            })
        })
        .unwrap_or(0)
}

fn ptx_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "f16",
        DType::Bf16 => "bf16",
        DType::Tf32 => "tf32",
        DType::E4m3 => "e4m3",
        _ => "e5m2",
    }
}

/// `dg_wgmma(d, desc_a, desc_b, scale_d)`: one `wgmma.mma_async` m64nNk16 (m64nNk32 for fp8,
/// m64nNk8 for tf32: 32 bytes of K each) with both operands in shared memory; its N/2
/// accumulator registers are spelled out, as PTX requires. 16-bit operands carry the transpose
/// bits of MN-major layouts; fp8 and tf32 ones have none (K-major only).
fn wgmma_wrapper(spec: &KernelSpec, n: u32) -> String {
    let (a_type, b_type) = (ptx_type(spec.a().dtype), ptx_type(spec.b().dtype));
    let k = 32 / spec.a().dtype.size_bytes();
    let regs = n / 2;
    let d_list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let outputs: Vec<String> = (0..regs).map(|i| format!("\"+f\"(d[{i}])")).collect();
    let trans = |role| u32::from(!is_k_major(spec, role));
    let mut out = String::from(
        "// d (+)= A(desc_a) x B(desc_b) for one m64 slice; scale_d = 0 overwrites d.\n",
    );
    out += "__device__ __forceinline__ void dg_wgmma(float (&d)[ACC], unsigned long long desc_a,\n";
    out += "                                         unsigned long long desc_b, int scale_d) {\n";
    out += "  asm volatile(\n";
    out += "      \"{\\n .reg .pred p;\\n\"\n";
    out += &format!("      \" setp.ne.b32 p, %{}, 0;\\n\"\n", regs + 2);
    out += &format!("      \" wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{a_type}.{b_type}\"\n");
    let reg_lines: Vec<String> = d_list.chunks(16).map(|c| c.join(", ")).collect();
    out += &format!("      \" {{{}}}, \"\n", reg_lines.join(",\"\n      \" "));
    let transposes = if spec.a().dtype.size_bytes() != 2 {
        String::new()
    } else {
        format!(", {}, {}", trans(Role::A), trans(Role::B))
    };
    out += &format!(
        "      \" %{}, %{}, p, 1, 1{transposes};\\n}}\\n\"\n",
        regs,
        regs + 1,
    );
    out += "      : ";
    for (i, chunk) in outputs.chunks(8).enumerate() {
        if i > 0 {
            out += ",\n        ";
        }
        out += &chunk.join(", ");
    }
    out += "\n      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n}";
    out
}

/// Plan-specific lines of the header comment.
fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let (t, consumers) = (plan.tile, consumer_warpgroups(&plan.threads));
    let rows_each = t.m / plan.threads.tile_split().0.max(1);
    let major = |role| {
        if is_k_major(spec, role) {
            "K-major"
        } else {
            "MN-major"
        }
    };
    let stage_bytes =
        plan.smem.a_stage_bytes + plan.smem.b_stage_bytes + plan.smem.scale_stage_bytes;
    let mma_k = 32 / spec.a().dtype.size_bytes();
    let mut lines = vec![
        format!(
            "stage ring: {} x {:.1} KiB = {:.1} KiB, 128-byte swizzle; A tile {}x{} {}, B tile {}x{} {}",
            plan.stages,
            stage_bytes as f64 / 1024.0,
            plan.smem_bytes() as f64 / 1024.0,
            t.m,
            t.k,
            major(Role::A),
            t.k,
            t.n,
            major(Role::B)
        ),
        format!(
            "copies: TMA through tensor maps, out-of-bounds boxes zero-filled{}",
            if plan.cluster_m > 1 {
                format!("; B multicast over a {}x1 cluster", plan.cluster_m)
            } else {
                String::new()
            }
        ),
        format!(
            "threads: {} = 1 producer warpgroup ({} registers) + {consumers} \
             consumer warpgroup(s) ({} registers), {}: {rows_each} rows each as {} \
             wgmma.m64n{}k{mma_k} per k{mma_k} step",
            plan.threads.threads(),
            producer_registers(&spec.hardware),
            consumer_registers(consumers, &spec.hardware),
            if plan.threads.pingpong() {
                "ping-pong (whole tiles in turn; one's epilogue under the other's main loop)"
            } else {
                "cooperative (splitting each tile)"
            },
            rows_each / 64,
            t.n
        ),
        "schedule: persistent, one block per SM walking the tiles with a stride of the grid"
            .to_string(),
        match plan.epilogue {
            EpilogueStrategy::ViaSmem if stores_d_by_tma(spec) => format!(
                "epilogue: each consumer warp stages 16 x {EPILOGUE_CHUNK_COLS} results in \
                 shared memory ({}, {:.1} KiB in all) and TMA stores them where D's address and \
                 pitch are 16-byte aligned, else stores 16-byte pieces of rows",
                if plan.smem.epilogue_buffers == 2 {
                    "two buffers a warp: it stages the next piece while the last is stored"
                } else {
                    "one buffer a warp: a second does not fit beside the ring's stages"
                },
                plan.smem.epilogue_bytes as f64 / 1024.0
            ),
            EpilogueStrategy::ViaSmem => format!(
                "epilogue: each consumer warp stages 16 x {EPILOGUE_CHUNK_COLS} results in \
                 shared memory ({:.1} KiB in all) and stores them as 16-byte pieces of rows",
                plan.smem.epilogue_bytes as f64 / 1024.0
            ),
            EpilogueStrategy::Direct => {
                "epilogue: stored from the accumulators (column-major D)".to_string()
            }
        },
    ];
    if spec.a().dtype == DType::Tf32 {
        lines.push(
            "inputs: tf32, rounded from f32 by the copy engine as it loads (TFLOAT32 tensor maps: \
             to nearest, ties away from zero); wgmma alone would truncate"
                .to_string(),
        );
    }
    if promotes(spec) {
        lines.push(format!(
            "accumulation: two-level; each k-tile's {} fp8 products are summed by wgmma apart and \
             promoted into the f32 sums on the CUDA cores, times the K-block scales",
            t.k
        ));
    }
    lines
}

/// The sm90 plans: every tile of one 128-byte swizzle row of K, M of 64, 128 or 256 and N a
/// multiple of 8 up to 256, on one consumer, two cooperating or two in ping-pong, with and
/// without a 2x1 cluster, at 2 to [`MAX_PROPOSED_STAGES`] stages.
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    let tk = TILE_K_BYTES / spec.a().dtype.size_bytes();
    let settings = || PlanSettings {
        persistent: true,
        epilogue: epilogue_strategy(spec),
        operands: OperandPath {
            a_copy_bytes: TMA_ALIGNMENT_BYTES,
            b_copy_bytes: TMA_ALIGNMENT_BYTES,
            repack_misaligned: true,
        },
    };
    let mut out = Vec::new();
    // (consumers, consumers splitting a tile): one, two cooperating, or two in ping-pong.
    const SCHEDULES: [(u32, u32); 3] = [(1, 1), (2, 2), (2, 1)];
    for tm in [64, 128, 256] {
        for tn in (8..=256).step_by(8) {
            for (consumers, splitting) in SCHEDULES {
                let threads = ThreadLayout::Warpgroups {
                    consumers,
                    split_m: splitting,
                };
                // Clusters along N (A multicast, 1x2 and 2x2) were built and measured slower:
                // an H100 holds 30 clusters of 4 blocks (120 SMs), and A's multicast gained
                // nothing measurable where that cost no round (bench/RESULTS.md, 2026-12-06).
                for cluster_m in [1, 2] {
                    let tile = Tile {
                        m: tm,
                        n: tn,
                        k: tk,
                    };
                    let mut base = base_plan(spec, Backend::Sm90, tile, threads, settings());
                    base.cluster_m = cluster_m;
                    push_variants(&mut out, spec, base, 2..=MAX_PROPOSED_STAGES);
                }
            }
        }
    }
    out
}

/// The TMA + wgmma backend.
pub(super) struct Sm90;

impl BackendImpl for Sm90 {
    /// A, B and the scales TMA loads: 16-byte addresses (and pitches; a misaligned operand is
    /// repacked first).
    fn operand_alignment(&self, spec: &KernelSpec, plan: &Plan, operand: &Operand) -> u32 {
        if tma_a_scales(spec, plan).is_some_and(|s| s.name == operand.name) {
            TMA_ALIGNMENT_BYTES
        } else {
            super::copy_alignment(plan, operand)
        }
    }

    fn target_has(&self, hw: &Hardware) -> bool {
        hw.features.wgmma && hw.features.tma
    }

    fn refusal(&self, spec: &KernelSpec) -> Option<String> {
        // wgmma multiplies e4m3 by e5m2 (the fp8 gradient GEMMs).
        tensor_core_dtype_refusal(spec, true)
            .or_else(|| {
                let hw = &spec.hardware;
                (!self.target_has(hw))
                    .then(|| format!("{} ({}) lacks TMA and wgmma", hw.name, hw.arch))
            })
            .or_else(|| tf32_layout_refusal(spec))
    }

    fn default_calibration(&self) -> BackendCalibration {
        BackendCalibration {
            mma_efficiency: 0.80,
            l2_efficiency: 0.80,
            smem_efficiency: 0.90,
            kblock_scale_cycles: Some(0.0),
            promotion_cycles: Some(0.0),
            producer_regs: Some(DEFAULT_PRODUCER_REGS),
            address_regs: Some(DEFAULT_ADDRESS_REGS),
            stream_efficiency: None,
            launch_saving_us: None,
        }
    }

    fn propose(&self, spec: &KernelSpec) -> Vec<Plan> {
        propose(spec)
    }

    fn epilogue_strategy(&self, spec: &KernelSpec) -> EpilogueStrategy {
        epilogue_strategy(spec)
    }

    /// `warps_m` consumers per tile, the block's warpgroups but the producer's in all.
    fn recorded_threads(&self, warps: RecordedWarps) -> ThreadLayout {
        ThreadLayout::Warpgroups {
            consumers: (warps.threads / 128).saturating_sub(warps.producer_warpgroups),
            split_m: warps.warps_m,
        }
    }

    fn smem_layout(
        &self,
        spec: &KernelSpec,
        tile: Tile,
        threads: &ThreadLayout,
        stages: u32,
    ) -> SmemLayout {
        smem_layout(spec, tile, threads, stages)
    }

    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
        check(spec, plan)
    }

    /// fp8 wgmma reads K-major operands only: an M-major A (`col`) or N-major B (`row`) of fp8
    /// is transposed by the launcher into a K-major workspace.
    fn transposes(&self, a: (DType, Layout), b: (DType, Layout)) -> [bool; 2] {
        let fp8 = a.0.is_fp8() && b.0.is_fp8();
        [fp8 && a.1 != Layout::Row, fp8 && b.1 != Layout::Col]
    }

    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError> {
        let mut values = values(spec, plan);
        values.push((
            "SPLIT_SCALES",
            epilogue::split_scale_code(spec, plan.tile.k)?,
        ));
        Ok(Rendering {
            template_name: "sm90_gemm.cu",
            template: TEMPLATE,
            values,
            described: describe(spec, plan),
            extra_args: tensor_maps(spec, plan)
                .into_iter()
                .map(KernelArg::TensorMap)
                .collect(),
        })
    }

    /// wgmma reads A and B from shared memory through descriptors: no fragments but fp8's one
    /// m64 slice of partial sums of a k-tile (a consumer's slices take turns with them).
    fn fragment_registers(&self, plan: &Plan, _accumulators: u32, input_bytes: u32) -> u32 {
        if input_bytes == 1 {
            partial_sum_registers(plan.tile.n)
        } else {
            0
        }
    }

    /// fp8 partial sums are dead once the main loop ends, unless the epilogue is deferred into
    /// the next tile's first k-tile, whose partial sums are then in flight.
    fn epilogue_reuses_fragments(&self, plan: &Plan, input_bytes: u32) -> bool {
        input_bytes == 1 && !defers_epilogue(plan, input_bytes)
    }

    fn defers_epilogue(&self, plan: &Plan, input_bytes: u32) -> bool {
        defers_epilogue(plan, input_bytes)
    }

    fn register_cap(&self, plan: &Plan, hw: &Hardware) -> u32 {
        let hw_cap = hw.max_regs_per_thread;
        if !plan.threads.has_producer() {
            return hw_cap;
        }
        // One block per SM: with setmaxnreg the consumers get the kernel's `setmaxnreg.inc`
        // figure, else every thread an equal share.
        if hw.features.setmaxnreg {
            return consumer_registers(consumer_warpgroups(&plan.threads), hw).min(hw_cap);
        }
        (hw.regs_per_sm / plan.threads.threads().max(1) / 8 * 8).min(hw_cap)
    }

    fn fragment_read_bytes(&self, plan: &Plan, a: DType, b: DType) -> f64 {
        super::warp_fragment_read_bytes(plan, a, b)
    }

    /// The consumers wait on a full-barrier per k-block; the producer runs ahead.
    fn barrier(&self, _plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64) {
        (BarrierKind::Mbarrier, 1, cal.mbarrier_wait_cycles)
    }

    fn load_round_trip_cycles(&self, hw: &Hardware) -> f64 {
        hw.latencies.tma_round_trip_cycles.unwrap_or(0) as f64
    }

    /// The consumer warpgroups (the producer does no math).
    fn warpgroups(&self, plan: &Plan) -> u32 {
        consumer_warpgroups(&plan.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every producer figure the hardware file may give (`setmaxnreg` takes 24..=256 in steps of
    /// 8) leaves the consumers a figure whose split fits the registers the block launches with,
    /// so that no `setmaxnreg.inc` waits for ever; a 40-register producer keeps 232 for two
    /// consumers and 240 for one.
    #[test]
    fn the_register_split_fits_the_block() {
        let mut hw = crate::hw::preset("h200").unwrap();
        for producer in (24..=256).step_by(8) {
            hw.calibration.backends.get_mut(Backend::Sm90).producer_regs = Some(producer);
            for consumers in [1, 2] {
                let each = consumer_registers(consumers, &hw);
                let pool = register_pool(128 * (1 + consumers), &hw);
                assert!(
                    128 * producer + 128 * consumers * each <= pool,
                    "producer {producer}, {consumers} consumers at {each}: pool {pool}"
                );
                assert!(each.is_multiple_of(8) && each <= 240);
            }
        }
        hw.calibration.backends.get_mut(Backend::Sm90).producer_regs = Some(40);
        assert_eq!(consumer_registers(2, &hw), 232);
        assert_eq!(consumer_registers(1, &hw), 240);
        // The split that hung: a 64-register producer leaves two consumers 216, not 224.
        hw.calibration.backends.get_mut(Backend::Sm90).producer_regs = Some(64);
        assert_eq!(consumer_registers(2, &hw), 216);
    }
}
