//! `Plan`: every decision a kernel generator needs, as plain data. The search produces plans,
//! the model predicts them, codegen renders them and the verifier checks them; none of them
//! recomputes a decision that lives here.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which kernel family implements the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Hopper: TMA loads, wgmma, mbarrier pipeline, warp specialization.
    Sm90,
    /// Ampere-class: cp.async multistage ring, ldmatrix, mma.sync (runs on sm_80 and later).
    Sm80,
    /// CUDA-core FFMA fallback for every dtype on every architecture.
    Simt,
    /// CUDA-core streaming kernel for GEMMs with a few rows or columns (decode-sized M, a
    /// handful of outputs per row): reads the large operand once, at any alignment.
    Gemv,
    /// CUDA-core kernel for GEMMs too small to pay for a pipeline: each warp's lanes load
    /// their share of K straight from global memory and sum it.
    Tiny,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Sm90,
        Backend::Sm80,
        Backend::Simt,
        Backend::Gemv,
        Backend::Tiny,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Sm90 => "sm90",
            Backend::Sm80 => "sm80",
            Backend::Simt => "simt",
            Backend::Gemv => "gemv",
            Backend::Tiny => "tiny",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether this backend's math on inputs of `input` runs on tensor cores.
    pub fn uses_tensor_cores(self, input: crate::dtype::DType) -> bool {
        crate::backend::of(self).uses_tensor_cores(input)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tile one thread block computes per main-loop iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tile {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

/// How a block's threads split the work, in each backend's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ThreadLayout {
    /// sm80: `m x n` warps, each computing a (tile.m / m) x (tile.n / n) warp tile with
    /// mma.sync.
    Warps { m: u32, n: u32 },
    /// sm90: one producer warpgroup that issues the TMA loads, and `consumers` warpgroups that do
    /// the math. `split_m` consumers share each tile (cooperative: each takes tile.m / split_m
    /// rows); when there are more consumers than that, each group takes whole tiles in turn
    /// (ping-pong).
    Warpgroups { consumers: u32, split_m: u32 },
    /// simt: `count` threads, each computing an equal share of the tile with FFMA.
    Threads { count: u32 },
}

impl ThreadLayout {
    /// Threads per block, producers included.
    pub fn threads(&self) -> u32 {
        match *self {
            // Saturating: a plan read from a file may hold any numbers; the checks refuse them.
            ThreadLayout::Warps { m, n } => m.saturating_mul(n).saturating_mul(32),
            ThreadLayout::Warpgroups { consumers, .. } => {
                consumers.saturating_add(1).saturating_mul(128)
            }
            ThreadLayout::Threads { count } => count,
        }
    }

    /// Threads that do the math (all but a producer).
    pub fn math_threads(&self) -> u32 {
        match *self {
            ThreadLayout::Warpgroups { consumers, .. } => consumers.saturating_mul(128),
            _ => self.threads(),
        }
    }

    /// Threads that hold one tile's accumulators.
    pub fn tile_threads(&self) -> u32 {
        match *self {
            ThreadLayout::Warpgroups { split_m, .. } => split_m.saturating_mul(128),
            _ => self.threads(),
        }
    }

    /// Whether a producer warpgroup feeds the math threads (and waits on mbarriers for it).
    pub fn has_producer(&self) -> bool {
        matches!(self, ThreadLayout::Warpgroups { .. })
    }

    /// sm90 ping-pong: more consumers than share one tile, so each takes whole tiles in turn;
    /// otherwise they cooperate on every tile.
    pub fn pingpong(&self) -> bool {
        matches!(*self, ThreadLayout::Warpgroups { consumers, split_m } if consumers > split_m)
    }

    /// The math threads' grid over the tile, (along M, along N): warps for sm80, consumer
    /// warpgroups for sm90, one thread block's worth for simt.
    pub fn tile_split(&self) -> (u32, u32) {
        match *self {
            ThreadLayout::Warps { m, n } => (m, n),
            ThreadLayout::Warpgroups { split_m, .. } => (split_m, 1),
            ThreadLayout::Threads { .. } => (1, 1),
        }
    }
}

impl fmt::Display for ThreadLayout {
    /// The plan label's part: `w2x4` (sm80 warps; sm90 consumers per tile along M, then 1, with
    /// ` pp` for ping-pong), `t256` (simt threads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ThreadLayout::Warps { m, n } => write!(f, "w{m}x{n}"),
            ThreadLayout::Warpgroups { split_m, .. } if self.pingpong() => {
                write!(f, "w{split_m}x1 pp")
            }
            ThreadLayout::Warpgroups { split_m, .. } => write!(f, "w{split_m}x1"),
            ThreadLayout::Threads { count } => write!(f, "t{count}"),
        }
    }
}

/// The order in which blocks walk the output tiles, for L2 reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Raster {
    /// Tiles are visited in column-major groups of `group_m` tile rows (1 = plain row order).
    pub group_m: u32,
}

/// How the shared-memory tiles are laid out to avoid bank conflicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmemSwizzle {
    /// Rows padded by `pad_elems` elements.
    Padded { pad_elems: u32 },
    /// 16-byte chunks XOR-permuted by row (within each 128-byte span), so that the same chunk of
    /// any 8 consecutive rows lands in distinct banks: TMA's 128B swizzle and its cp.async twin.
    XorChunks,
    /// No transformation (SIMT kernels read broadcast-friendly layouts).
    None,
}

/// Shared-memory budget of the plan, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SmemLayout {
    /// One pipeline stage of A (tile.m x tile.k) including padding.
    pub a_stage_bytes: u32,
    /// One pipeline stage of B (tile.k x tile.n) including padding.
    pub b_stage_bytes: u32,
    /// Staging for the epilogue (0 when it writes from registers).
    pub epilogue_bytes: u32,
    /// The buffers each epilogue warp's TMA stores take turns in (0 when D is not TMA-stored: the
    /// threads store it, from registers or from one buffer each warp reads back): with two, a
    /// warp stages its next piece while the copy engine reads the last; with one, it waits.
    #[serde(default)]
    pub epilogue_buffers: u32,
    /// mbarriers and other bookkeeping.
    pub barrier_bytes: u32,
    /// One pipeline stage's fp8 K-block scales, staged beside its operands (sm90; 0 otherwise).
    #[serde(default)]
    pub scale_stage_bytes: u32,
    pub swizzle: SmemSwizzle,
}

impl SmemLayout {
    /// No shared memory at all (a kernel that loads into registers and stores from them).
    pub const NONE: SmemLayout = SmemLayout {
        a_stage_bytes: 0,
        b_stage_bytes: 0,
        epilogue_bytes: 0,
        epilogue_buffers: 0,
        barrier_bytes: 0,
        scale_stage_bytes: 0,
        swizzle: SmemSwizzle::None,
    };

    /// Whether the epilogue's warps wait for the copy engine to read a piece before staging the
    /// next (one TMA-store buffer each).
    pub fn epilogue_waits_for_stores(&self) -> bool {
        self.epilogue_buffers == 1
    }

    pub fn total_bytes(&self, stages: u32) -> u32 {
        stages * (self.a_stage_bytes + self.b_stage_bytes + self.scale_stage_bytes)
            + self.epilogue_bytes
            + self.barrier_bytes
    }
}

/// How the epilogue gets results to memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpilogueStrategy {
    /// Each thread applies the epilogue to its fragment and stores it, predicated at the edges.
    Direct,
    /// Fragments go through shared memory so global stores are full 16-byte rows.
    ViaSmem,
}

/// How global operands reach shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperandPath {
    /// Width of one global->smem copy of A / B in bytes (16, 8, 4 or the element size). Wider
    /// copies need leading dimensions and base pointers aligned to it; the runtime checks.
    pub a_copy_bytes: u32,
    pub b_copy_bytes: u32,
    /// When the operands are misaligned for `*_copy_bytes`, copy them into an aligned workspace
    /// first (one extra pass) instead of narrowing the copies.
    pub repack_misaligned: bool,
}

/// A complete kernel plan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "PlanRecord")]
pub struct Plan {
    pub backend: Backend,
    pub tile: Tile,
    pub threads: ThreadLayout,
    pub stages: u32,
    /// Blocks per cluster along M and N (1x1 = no cluster).
    pub cluster_m: u32,
    pub cluster_n: u32,
    pub raster: Raster,
    /// K is split across this many blocks whose partial sums are reduced (1 = none).
    pub split_k: u32,
    /// One block per SM looping over tiles (sm90) instead of one block per tile.
    pub persistent: bool,
    pub smem: SmemLayout,
    pub epilogue: EpilogueStrategy,
    pub operands: OperandPath,
}

/// A plan as JSON holds it: today's, or one recorded before the thread layout had a type of
/// its own (`tune --json` records, which `tune --replay` re-judges), whose `warps` object
/// (`warps_m`, `warps_n`, `producer_warpgroups`, `threads`) meant warps, warpgroups or threads
/// by backend.
#[derive(Deserialize)]
struct PlanRecord {
    backend: Backend,
    tile: Tile,
    #[serde(default)]
    threads: Option<ThreadLayout>,
    #[serde(default)]
    warps: Option<RecordedWarps>,
    stages: u32,
    cluster_m: u32,
    cluster_n: u32,
    raster: Raster,
    split_k: u32,
    persistent: bool,
    smem: SmemLayout,
    epilogue: EpilogueStrategy,
    operands: OperandPath,
}

/// The thread layout of a plan recorded before it had a type: each backend reads it its own way
/// (`BackendImpl::recorded_threads`).
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct RecordedWarps {
    pub warps_m: u32,
    pub warps_n: u32,
    pub producer_warpgroups: u32,
    pub threads: u32,
}

impl TryFrom<PlanRecord> for Plan {
    type Error = String;

    fn try_from(r: PlanRecord) -> Result<Plan, String> {
        let threads = match (r.threads, r.warps) {
            (Some(threads), _) => threads,
            (None, Some(warps)) => crate::backend::of(r.backend).recorded_threads(warps),
            (None, None) => return Err("missing field `threads`".to_string()),
        };
        Ok(Plan {
            backend: r.backend,
            tile: r.tile,
            threads,
            stages: r.stages,
            cluster_m: r.cluster_m,
            cluster_n: r.cluster_n,
            raster: r.raster,
            split_k: r.split_k,
            persistent: r.persistent,
            smem: r.smem,
            epilogue: r.epilogue,
            operands: r.operands,
        })
    }
}

impl Plan {
    pub fn smem_bytes(&self) -> u32 {
        self.smem.total_bytes(self.stages)
    }

    /// A short human name, e.g. `sm80 128x128x32 s4 w2x4 g8`.
    pub fn label(&self) -> String {
        let mut s = self.label_in_plain_raster();
        if self.raster.group_m > 1 {
            s += &format!(" g{}", self.raster.group_m);
        }
        s
    }

    /// The label of this plan in plain raster order (the label without its ` gN`): the same for
    /// plans that differ only in the order their blocks walk the tiles in.
    pub fn label_in_plain_raster(&self) -> String {
        let mut s = format!(
            "{} {}x{}x{} s{} {}",
            self.backend, self.tile.m, self.tile.n, self.tile.k, self.stages, self.threads
        );
        if self.cluster_m * self.cluster_n > 1 {
            s += &format!(" c{}x{}", self.cluster_m, self.cluster_n);
        }
        if self.split_k > 1 {
            s += &format!(" sk{}", self.split_k);
        }
        s
    }
}

/// A range of problem shapes served by one plan (inclusive bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShapeBucket {
    pub m: (u64, u64),
    pub n: (u64, u64),
    pub k: (u64, u64),
}

/// Ranges are split at powers of two from this size on; smaller sizes share the first bucket.
const FIRST_BUCKET_END: u64 = 16;

impl ShapeBucket {
    /// The buckets a declared shape is compiled as: a fixed value is one bucket, each value of a
    /// set is its own bucket, and a range is cut at powers of two (1..=16, 17..=32, ...), since a
    /// plan's efficiency changes with the number of tiles, which moves with log2 of the size.
    pub fn split(shape: &crate::spec::ShapeSpec) -> Vec<ShapeBucket> {
        let (ms, ns, ks) = (
            dim_buckets(&shape.m),
            dim_buckets(&shape.n),
            dim_buckets(&shape.k),
        );
        let mut out = Vec::with_capacity(ms.len() * ns.len() * ks.len());
        for &m in &ms {
            for &n in &ns {
                for &k in &ks {
                    out.push(ShapeBucket { m, n, k });
                }
            }
        }
        out
    }

    /// The largest shape in the bucket, which the search plans for.
    pub fn largest(&self) -> Shape {
        Shape::new(self.m.1, self.n.1, self.k.1)
    }

    pub fn contains(&self, m: u64, n: u64, k: u64) -> bool {
        (self.m.0..=self.m.1).contains(&m)
            && (self.n.0..=self.n.1).contains(&n)
            && (self.k.0..=self.k.1).contains(&k)
    }
}

fn dim_buckets(domain: &crate::spec::DimDomain) -> Vec<(u64, u64)> {
    use crate::spec::DimDomain;
    match domain {
        DimDomain::Fixed(v) => vec![(*v, *v)],
        DimDomain::Set(values) => values.iter().map(|&v| (v, v)).collect(),
        DimDomain::Range { lo, hi } => {
            let mut out = Vec::new();
            let mut start = *lo;
            while start <= *hi {
                let end = start
                    .max(FIRST_BUCKET_END)
                    .checked_next_power_of_two()
                    .unwrap_or(u64::MAX)
                    .min(*hi);
                out.push((start, end));
                match end.checked_add(1) {
                    Some(next) => start = next,
                    None => break,
                }
            }
            out
        }
    }
}

/// One compiled variant of a kernel: a plan and the shapes it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// Stable name used for file names and the dispatch table, e.g. `v0_m1-64`.
    pub name: String,
    pub bucket: ShapeBucket,
    pub plan: Plan,
}

/// One concrete problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub m: u64,
    pub n: u64,
    pub k: u64,
}

impl Shape {
    pub fn new(m: u64, n: u64, k: u64) -> Shape {
        Shape { m, n, k }
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DimDomain, ShapeSpec};

    #[test]
    fn ranges_split_at_powers_of_two() {
        let shape = ShapeSpec {
            m: DimDomain::Range { lo: 1, hi: 8192 },
            n: DimDomain::Fixed(4096),
            k: DimDomain::Set(vec![512, 7168]),
            fallback: crate::spec::ShapeFallback::None,
        };
        let buckets = ShapeBucket::split(&shape);
        let ms: Vec<_> = buckets.iter().map(|b| b.m).collect();
        assert_eq!(buckets.len(), 10 * 2);
        assert_eq!(ms[0], (1, 16));
        assert_eq!(ms[2], (17, 32));
        assert_eq!(buckets.last().unwrap().m, (4097, 8192));
        // Every M in the range lands in exactly one bucket of a given (N, K).
        for m in [1, 16, 17, 100, 4096, 4097, 8192] {
            let hits = buckets.iter().filter(|b| b.contains(m, 4096, 512)).count();
            assert_eq!(hits, 1, "m = {m}");
        }
    }

    #[test]
    fn odd_range_bounds() {
        let shape = ShapeSpec {
            m: DimDomain::Range { lo: 20, hi: 33 },
            n: DimDomain::Fixed(1),
            k: DimDomain::Fixed(1),
            fallback: crate::spec::ShapeFallback::None,
        };
        let ms: Vec<_> = ShapeBucket::split(&shape).iter().map(|b| b.m).collect();
        assert_eq!(ms, vec![(20, 32), (33, 33)]);
    }
}
