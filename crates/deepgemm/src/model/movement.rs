//! Data-movement layer: bytes at each memory level and the time they take at that level's
//! sustained bandwidth.
//!
//! - DRAM: operand bytes actually fetched from DRAM, which depends on how much of A and B the L2
//!   keeps between the blocks that share them. Blocks of one wave run together, so a panel (a
//!   tile row of A or a tile column of B) that several blocks of the wave need is fetched once;
//!   the grouped rasterization (`group_m`) makes a wave cover few rows and few columns. Panels
//!   survive to the next wave only when the whole of A and B fits the resident part of the L2.
//!   Plus the epilogue's traffic (D, C, vectors, split-K partials) and the repack pass.
//! - L2 -> smem: every block copies its A panel slice and B panel slice; a cluster multicasts the
//!   panel its blocks share, so B is copied once per `cluster_m` blocks and A once per `cluster_n`.
//! - smem -> registers: fragment loads (ldmatrix / wgmma descriptors / SIMT scalar loads) plus the
//!   copies into smem, against the SM's shared-memory bandwidth.

use super::{Geometry, Problem};
use crate::dtype::DType;
use crate::hw::Hardware;
use crate::plan::{Plan, Tile};
use serde::{Deserialize, Serialize};

/// The data-movement figures of one plan on one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Movement {
    /// A and B bytes of one pipeline stage, without smem padding.
    pub operand_stage_bytes: u64,
    /// `operand_stage_bytes` times the stage count: the operand tiles the ring holds.
    pub operand_tile_bytes: u64,
    /// A and B bytes read from DRAM.
    pub operand_dram_bytes: f64,
    /// D written, C and vectors read, split-K partial sums written and read back.
    pub epilogue_dram_bytes: f64,
    /// The extra pass that copies misaligned operands into an aligned workspace (read + write).
    pub repack_dram_bytes: f64,
    /// Operands that pass copies, queued ahead of the GEMM in launches of the copy kernel of up
    /// to [`crate::codegen::REPACK_COPIES_PER_LAUNCH`] each.
    pub repack_copies: u32,
    /// Operands the launcher transposes (read + write, in `repack_dram_bytes` too), one launch
    /// of the transpose kernel each.
    pub transposes: u32,
    /// Everything above: the `dram_bytes` observable.
    pub dram_bytes: f64,
    /// A and B bytes copied from L2 into shared memory by all blocks.
    pub l2_to_smem_bytes: f64,
    /// Shared-memory traffic of all blocks: tile writes plus fragment reads.
    pub smem_bytes: f64,
    /// Fraction of L2 -> smem operand bytes served by the L2 rather than DRAM.
    pub l2_hit_rate: f64,
    /// Each level's bytes at its sustained bandwidth over the whole GPU, microseconds.
    pub dram_us: f64,
    pub l2_us: f64,
    pub smem_us: f64,
    /// Time of the repack pass alone (serial with the GEMM), microseconds.
    pub repack_us: f64,
    /// Per block: bytes copied L2 -> smem, smem traffic, epilogue DRAM bytes.
    pub block_l2_bytes: f64,
    pub block_smem_bytes: f64,
    pub block_epilogue_bytes: f64,
}

/// A and B bytes of `stages` pipeline stages of `tile`, without padding: the operand tiles a
/// stage ring holds. (128x256x64 bf16, 4 stages: (128*64 + 64*256) * 2 * 4 = 196608.)
pub fn operand_tile_bytes(tile: Tile, a: DType, b: DType, stages: u32) -> u64 {
    let per_stage = tile.m as u64 * tile.k as u64 * a.size_bytes() as u64
        + tile.k as u64 * tile.n as u64 * b.size_bytes() as u64;
    per_stage * stages as u64
}

/// Waves whose panels are counted one by one. Past this many the full waves are sampled evenly
/// (the raster order repeats, so the sample's average is the waves' average): the cost of a
/// prediction must not grow with M, or a range such as `M in 1..=2^30` would take hours to plan.
const COUNTED_WAVES: u64 = 64;

/// The distinct A row panels and B column panels each wave touches, summed over the waves, in
/// launch order (split-K slices outermost, as `grid.y` is).
fn panels_over_waves(geo: &Geometry, group_m: u32, wave_blocks: u64) -> (f64, f64) {
    let wave_blocks = wave_blocks.max(1);
    let wave = |start: u64| -> (f64, f64) {
        let end = (start + wave_blocks).min(geo.blocks);
        let (mut rows, mut cols) = (0, 0);
        // A wave may span split-K slices; panels of different slices are different K ranges.
        let mut s = start;
        while s < end {
            let slice_end = ((s / geo.tiles) + 1) * geo.tiles;
            let e = end.min(slice_end);
            let (r, c) = distinct_panels(geo, group_m, s % geo.tiles, (e - 1) % geo.tiles + 1);
            rows += r;
            cols += c;
            s = e;
        }
        (rows as f64, cols as f64)
    };
    let full = geo.blocks / wave_blocks;
    let (mut rows, mut cols) = (0.0, 0.0);
    let sampled = full.min(COUNTED_WAVES);
    for j in 0..sampled {
        // Evenly spread over the full waves; every one of them when there are few.
        let (r, c) = wave(j * full / sampled * wave_blocks);
        rows += r;
        cols += c;
    }
    if sampled > 0 {
        let scale = full as f64 / sampled as f64;
        (rows, cols) = (rows * scale, cols * scale);
    }
    if !geo.blocks.is_multiple_of(wave_blocks) {
        let (r, c) = wave(full * wave_blocks);
        rows += r;
        cols += c;
    }
    (rows, cols)
}

/// Distinct tile rows and tile columns among output tiles `start..end` visited in grouped order:
/// groups of `group_m` tile rows, column-major inside a group (Triton's `GROUP_M` swizzle).
pub fn distinct_panels(geo: &Geometry, group_m: u32, start: u64, end: u64) -> (u64, u64) {
    let group_m = (group_m.max(1) as u64).min(geo.tiles_m);
    let group_tiles = group_m * geo.tiles_n;
    let (mut rows, mut cols) = (0, 0);
    let mut t = start;
    while t < end {
        let group = t / group_tiles;
        let first_row = group * group_m;
        let rows_here = (geo.tiles_m - first_row).min(group_m);
        let group_start = group * group_tiles;
        let group_end = group_start + rows_here * geo.tiles_n;
        let (ls, le) = (t - group_start, end.min(group_end) - group_start);
        rows += (le - ls).min(rows_here);
        cols += (le - 1) / rows_here - ls / rows_here + 1;
        t = group_start + le;
    }
    // Column panels repeat across groups; a wave never needs more than all of them.
    (rows, cols.min(geo.tiles_n))
}

/// `problem` as the kernel reads it; `transposed`: whether the launcher transposes A and B into
/// that layout first.
pub fn analyze(
    problem: &Problem,
    transposed: [bool; 2],
    plan: &Plan,
    geo: &Geometry,
    wave_blocks: u64,
    hw: &Hardware,
) -> Movement {
    let cal = &hw.calibration;
    let shape = problem.shape;
    let (ea, eb) = (problem.a.size_bytes() as f64, problem.b.size_bytes() as f64);
    let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
    let k_slice = geo.k_per_block as f64;

    // L2 -> smem: each block copies its rows of A and columns of B for its K slice; a cluster
    // multicasts the panel its blocks share.
    let a_panel = geo.rows_per_tile * k_slice * ea;
    let b_panel = geo.cols_per_tile * k_slice * eb;
    let block_l2_bytes =
        a_panel / plan.cluster_n.max(1) as f64 + b_panel / plan.cluster_m.max(1) as f64;
    let l2_to_smem_bytes = block_l2_bytes * geo.blocks as f64;

    // DRAM: panels shared inside a wave are fetched once; across waves only if A and B stay
    // resident in the L2.
    let compulsory = m * k * ea + k * n * eb;
    let resident = (hw.l2_bytes as f64) * cal.l2_resident_fraction;
    let operand_dram_bytes = if compulsory <= resident {
        compulsory
    } else {
        let (rows, cols) = panels_over_waves(geo, plan.raster.group_m, wave_blocks);
        let per_wave = rows * a_panel + cols * b_panel;
        per_wave.max(compulsory)
    };
    let l2_hit_rate = if l2_to_smem_bytes > 0.0 {
        (1.0 - operand_dram_bytes / l2_to_smem_bytes).clamp(0.0, 1.0)
    } else {
        0.0
    };

    // Epilogue: D written once, C read once, broadcast vectors once per tile; split-K slices
    // write f32 partials that the reducing block reads back.
    let tile_elems = geo.rows_per_tile * geo.cols_per_tile;
    let mut block_epilogue_bytes = tile_elems * problem.d.size_bytes() as f64 / geo.split_k as f64
        + problem.row_vector_bytes as f64 * geo.rows_per_tile / geo.split_k as f64
        + problem.col_vector_bytes as f64 * geo.cols_per_tile / geo.split_k as f64;
    if let Some(c) = problem.c {
        block_epilogue_bytes += tile_elems * c.size_bytes() as f64 / geo.split_k as f64;
    }
    if geo.split_k > 1 {
        // Each slice writes its partial tile; the last one reads all of them back.
        block_epilogue_bytes += 2.0 * tile_elems * 4.0;
    }
    let epilogue_dram_bytes = block_epilogue_bytes * geo.blocks as f64;

    let (mut repack_dram_bytes, repack_copies) = repack_bytes(problem, plan, transposed);
    // A transposed operand is read in its declared layout and written K-major once more.
    let transposes = transposed.iter().filter(|&&t| t).count() as u32;
    repack_dram_bytes += 2.0
        * (if transposed[0] {
            problem.a_bytes()
        } else {
            0.0
        } + if transposed[1] {
            problem.b_bytes()
        } else {
            0.0
        });
    let dram_bytes = operand_dram_bytes + epilogue_dram_bytes + repack_dram_bytes;

    // smem: the copies in, plus the fragment reads of each k-block.
    let block_smem_bytes = k_slice * (geo.rows_per_tile * ea + geo.cols_per_tile * eb)
        + fragment_read_bytes(problem, plan) * geo.k_blocks as f64;
    let smem_bytes = block_smem_bytes * geo.blocks as f64;

    let dram_bw = hw.dram_bw_gbps * 1e3 * cal.dram_efficiency; // bytes per microsecond
    let l2_bw = hw.l2_bw_gbps * 1e3 * cal.backends.get(plan.backend).l2_efficiency;
    let smem_bw = hw.smem_bw_bytes_per_clk_per_sm
        * cal.backends.get(plan.backend).smem_efficiency
        * hw.sms as f64
        * hw.clock_mhz as f64;
    Movement {
        operand_stage_bytes: operand_tile_bytes(plan.tile, problem.a, problem.b, 1),
        operand_tile_bytes: operand_tile_bytes(plan.tile, problem.a, problem.b, plan.stages),
        operand_dram_bytes,
        epilogue_dram_bytes,
        repack_dram_bytes,
        repack_copies,
        transposes,
        dram_bytes,
        l2_to_smem_bytes,
        smem_bytes,
        l2_hit_rate,
        dram_us: (operand_dram_bytes + epilogue_dram_bytes) / dram_bw,
        l2_us: l2_to_smem_bytes / l2_bw,
        smem_us: smem_bytes / smem_bw,
        repack_us: repack_dram_bytes / dram_bw,
        block_l2_bytes,
        block_smem_bytes,
        block_epilogue_bytes,
    }
}

/// Shared-memory bytes the block's threads read per k-block to feed the math instructions.
fn fragment_read_bytes(problem: &Problem, plan: &Plan) -> f64 {
    crate::backend::of(plan.backend).fragment_read_bytes(plan, problem.a, problem.b)
}

/// The repack pass: an operand whose leading dimension breaks the plan's copy width is copied
/// into an aligned workspace first (read + write), when the plan asks for that. Returns the bytes
/// and the number of operands copied.
fn repack_bytes(problem: &Problem, plan: &Plan, transposed: [bool; 2]) -> (f64, u32) {
    if !plan.operands.repack_misaligned {
        return (0.0, 0);
    }
    // A transposed operand lands in an aligned workspace: it needs no copy of its own.
    let (mut bytes, mut copies) = (0.0, 0);
    if !transposed[0] && !problem.a_aligned(plan.operands.a_copy_bytes) {
        bytes += 2.0 * problem.a_bytes();
        copies += 1;
    }
    if !transposed[1] && !problem.b_aligned(plan.operands.b_copy_bytes) {
        bytes += 2.0 * problem.b_bytes();
        copies += 1;
    }
    (bytes, copies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Shape;

    fn geometry(m: u64, n: u64, tm: u32, tn: u32) -> Geometry {
        Geometry::new(
            Shape::new(m, n, 1024),
            Tile {
                m: tm,
                n: tn,
                k: 64,
            },
            1,
        )
    }

    #[test]
    fn operand_tiles_of_a_128x256x64_bf16_4_stage_ring() {
        let tile = Tile {
            m: 128,
            n: 256,
            k: 64,
        };
        assert_eq!(
            operand_tile_bytes(tile, DType::Bf16, DType::Bf16, 4),
            196_608
        );
        assert_eq!(
            operand_tile_bytes(tile, DType::Bf16, DType::Bf16, 1),
            49_152
        );
    }

    #[test]
    fn grouped_raster_touches_fewer_panels() {
        // 16 x 16 tiles, a wave of 64 tiles: row order covers 4 rows x 16 columns, groups of 8
        // rows cover 8 rows x 8 columns.
        let geo = geometry(16 * 128, 16 * 128, 128, 128);
        assert_eq!(distinct_panels(&geo, 1, 0, 64), (4, 16));
        assert_eq!(distinct_panels(&geo, 8, 0, 64), (8, 8));
        // A range inside one row.
        assert_eq!(distinct_panels(&geo, 1, 3, 5), (1, 2));
    }

    #[test]
    fn many_waves_are_sampled_to_within_a_percent_of_counting_them() {
        // 40000 x 8 tiles in waves of 264 blocks: 1212 waves, far more than are counted.
        let geo = geometry(40_000 * 64, 8 * 128, 64, 128);
        let exact = |group_m: u32| {
            let (mut rows, mut cols) = (0u64, 0u64);
            let mut start = 0;
            while start < geo.blocks {
                let end = (start + 264).min(geo.blocks);
                let (r, c) = distinct_panels(&geo, group_m, start, end);
                (rows, cols) = (rows + r, cols + c);
                start = end;
            }
            (rows as f64, cols as f64)
        };
        for group_m in [1, 8] {
            let (rows, cols) = panels_over_waves(&geo, group_m, 264);
            let (er, ec) = exact(group_m);
            assert!((rows / er - 1.0).abs() < 0.01, "rows {rows} vs {er}");
            assert!((cols / ec - 1.0).abs() < 0.01, "cols {cols} vs {ec}");
        }
        // Few waves are counted exactly.
        let small = geometry(40 * 64, 8 * 128, 64, 128);
        assert_eq!(panels_over_waves(&small, 1, 264), (33.0 + 7.0, 8.0 + 8.0));
    }

    #[test]
    fn last_group_may_be_short() {
        // 10 tile rows, groups of 8: the second group has 2 rows.
        let geo = geometry(10 * 64, 4 * 64, 64, 64);
        assert_eq!(distinct_panels(&geo, 8, 32, 40), (2, 4));
        assert_eq!(distinct_panels(&geo, 8, 0, 40), (10, 4));
    }
}
