//! Synchronization layer: the barriers of the main loop and what the epilogue leaves exposed.
//!
//! - sm80 multistage ring: one `cp.async.wait_group` + `__syncthreads` per k-block;
//! - SIMT: two `__syncthreads` per k-block with one stage (before and after the load), one with
//!   two (double buffer);
//! - sm90 producer/consumer: the consumers wait on a full-barrier and arrive on an empty-barrier
//!   per k-block; the producer runs ahead, so only the consumers' wait is on the critical path.
//!
//! - sm90 fp8: each k-tile's partial sums are promoted into the f32 sums once its wgmmas are
//!   done, which lengthens the path from one k-tile's wgmmas to the next by a calibrated number
//!   of cycles (`calibration.backends.sm90.promotion_cycles`); with K-block scales, which are
//!   copied ahead, read back and applied in that promotion, by a second one
//!   (`calibration.backends.sm90.kblock_scale_cycles`).
//!
//! Other resident blocks keep the math pipes busy while one block waits, so a barrier's cost is
//! divided by the blocks per SM. The epilogue is exposed once per wave for a one-tile-per-block
//! kernel; a persistent kernel's is exposed once per tile round too, less the first k-tile of
//! the next tile where it runs under that (sm90 fp8), and only at the very end where the other
//! consumer computes meanwhile (ping-pong).

use crate::backend;
use crate::hw::Hardware;
use crate::plan::Plan;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarrierKind {
    Syncthreads,
    Mbarrier,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sync {
    pub kind: BarrierKind,
    pub barriers_per_kblock: u32,
    /// Cost of one barrier, cycles (from the hardware file's calibration).
    pub barrier_cycles: f64,
    /// Barriers one block passes in its main loop.
    pub barriers_per_block: u64,
    /// Cycles per k-block the K-block scales add to the main loop's critical path (sm90 fp8).
    #[serde(default)]
    pub kblock_scale_cycles: f64,
    /// Cycles per k-block the promotion of fp8 partial sums adds to the main loop's critical
    /// path (sm90 fp8, with or without K-block scales).
    #[serde(default)]
    pub promotion_cycles: f64,
    /// Whether a dedicated producer feeds consumers (sm90).
    pub producer_consumer: bool,
    /// Whether the epilogue overlaps other work (a ping-pong persistent kernel, whose other
    /// consumer keeps computing) or is exposed once per tile round.
    pub epilogue_hidden: bool,
    /// Whether a cooperative persistent kernel stores a tile while the next tile's first k-tile
    /// computes (sm90 fp8), so that only what the epilogue takes beyond that k-tile is exposed.
    #[serde(default)]
    pub epilogue_under_next_k_tile: bool,
    /// Barrier time on the critical path, summed over waves, microseconds.
    pub exposed_us: f64,
}

/// Barrier pattern of a plan; `exposed_us` is filled in by the caller once waves are known.
/// `input_bytes`: the size of an A (and B) element.
pub fn barriers(
    plan: &Plan,
    k_blocks: u64,
    k_block_scaled: bool,
    input_bytes: u32,
    hw: &Hardware,
) -> Sync {
    let cal = &hw.calibration;
    let implementation = backend::of(plan.backend);
    let (kind, barriers_per_kblock, barrier_cycles) = implementation.barrier(plan, cal);
    let figures = cal.backends.get(plan.backend);
    Sync {
        kind,
        barriers_per_kblock,
        barrier_cycles,
        barriers_per_block: k_blocks * barriers_per_kblock as u64,
        // A backend without these figures stages no K-block scales and promotes nothing.
        kblock_scale_cycles: if k_block_scaled {
            figures.kblock_scale_cycles.unwrap_or(0.0)
        } else {
            0.0
        },
        // 1-byte inputs are fp8 where the figure exists (sm90 takes no i8), summed in two levels
        // as the backend's fragment registers count them.
        promotion_cycles: if input_bytes == 1 {
            figures.promotion_cycles.unwrap_or(0.0)
        } else {
            0.0
        },
        producer_consumer: plan.threads.has_producer(),
        epilogue_hidden: plan.persistent && plan.threads.pingpong(),
        epilogue_under_next_k_tile: plan.persistent
            && implementation.defers_epilogue(plan, input_bytes),
        exposed_us: 0.0,
    }
}

/// Barrier cycles a wave's critical path carries when `blocks_per_sm` blocks share an SM.
pub fn exposed_cycles_per_wave(sync: &Sync, blocks_per_sm: u64) -> f64 {
    let k_blocks = sync.barriers_per_block as f64 / sync.barriers_per_kblock.max(1) as f64;
    (sync.barriers_per_block as f64 * sync.barrier_cycles
        + k_blocks * (sync.kblock_scale_cycles + sync.promotion_cycles))
        / blocks_per_sm.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::preset;

    #[test]
    fn co_resident_blocks_hide_each_others_barriers() {
        let hw = preset("h200").unwrap();
        let sync = Sync {
            kind: BarrierKind::Syncthreads,
            barriers_per_kblock: 1,
            barrier_cycles: hw.calibration.syncthreads_cycles,
            barriers_per_block: 128,
            kblock_scale_cycles: 0.0,
            promotion_cycles: 0.0,
            producer_consumer: false,
            epilogue_hidden: false,
            epilogue_under_next_k_tile: false,
            exposed_us: 0.0,
        };
        let one = exposed_cycles_per_wave(&sync, 1);
        assert_eq!(one, 128.0 * hw.calibration.syncthreads_cycles);
        assert_eq!(exposed_cycles_per_wave(&sync, 4), one / 4.0);
    }
}
