//! Register layer: registers per thread and whether the plan spills.
//!
//! accumulators (TILE_M x TILE_N / math threads, one fp32 register each) + A/B fragments (double
//! buffered across k-steps) + addresses (a base, the backend's own where it has one, plus a share
//! per cp.async copy a thread issues per stage: the copies are unrolled) + epilogue temporaries
//! (which reuse the registers of fp8 partial sums, dead by the epilogue), against the per-thread
//! cap: the hardware's `max_regs_per_thread`, or for a warp-specialized Hopper plan the
//! consumers' share after the producer gives registers back with `setmaxnreg`.

use crate::backend;
use crate::hw::Hardware;
use crate::plan::Plan;
use serde::{Deserialize, Serialize};

/// Registers per thread of the threads that do the math (the consumers of a Hopper plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registers {
    pub accumulators: u32,
    pub fragments: u32,
    pub addresses: u32,
    pub epilogue: u32,
    /// The sum: the `registers` observable.
    pub total: u32,
    /// The most a thread of this plan may use.
    pub cap: u32,
    /// `total > cap`: the compiler would spill to local memory.
    pub spills: bool,
}

/// The registers a thread is charged for occupancy: allocation is in units of 8 per thread.
pub fn allocated(per_thread: u32) -> u32 {
    per_thread.div_ceil(8) * 8
}

/// `input_bytes` is the size of an A (and B) element.
pub fn analyze(plan: &Plan, input_bytes: u32, hw: &Hardware) -> Registers {
    let cal = &hw.calibration;
    let t = plan.tile;
    let accumulators = (t.m * t.n).div_ceil(plan.threads.tile_threads().max(1));
    let implementation = backend::of(plan.backend);
    let fragments = implementation.fragment_registers(plan, accumulators, input_bytes);
    let base_addresses = cal
        .backends
        .get(plan.backend)
        .address_regs
        .unwrap_or(cal.address_regs_per_thread);
    let addresses = base_addresses
        + (cal.regs_per_copy * copies_per_thread(plan, input_bytes) as f64).ceil() as u32;
    let epilogue = cal.epilogue_regs_per_thread;
    let total = accumulators
        + addresses
        + if implementation.epilogue_reuses_fragments(plan, input_bytes) {
            fragments.max(epilogue)
        } else {
            fragments + epilogue
        };
    let cap = implementation.register_cap(plan, hw);
    Registers {
        accumulators,
        fragments,
        addresses,
        epilogue,
        total,
        cap,
        spills: total > cap,
    }
}

/// Copies one thread issues per stage that hold registers (sm80's cp.async: TMA and SIMT staging
/// issue none).
pub fn copies_per_thread(plan: &Plan, input_bytes: u32) -> u32 {
    backend::of(plan.backend).copies_per_thread(plan, input_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::preset;
    use crate::plan::*;

    fn sm80_plan(tm: u32, tn: u32, wm: u32, wn: u32) -> Plan {
        Plan {
            backend: Backend::Sm80,
            tile: Tile {
                m: tm,
                n: tn,
                k: 32,
            },
            threads: ThreadLayout::Warps { m: wm, n: wn },
            stages: 3,
            cluster_m: 1,
            cluster_n: 1,
            raster: Raster { group_m: 1 },
            split_k: 1,
            persistent: false,
            smem: SmemLayout::NONE,
            epilogue: EpilogueStrategy::Direct,
            operands: OperandPath {
                a_copy_bytes: 16,
                b_copy_bytes: 16,
                repack_misaligned: true,
            },
        }
    }

    #[test]
    fn sm80_128x128_with_8_warps() {
        let hw = preset("h200").unwrap();
        let r = analyze(&sm80_plan(128, 128, 2, 4), 2, &hw);
        // (128 + 128) rows x 32 k x 2 bytes / 16-byte copies / 256 threads = 4 copies each.
        assert_eq!(copies_per_thread(&sm80_plan(128, 128, 2, 4), 2), 4);
        let copies = (hw.calibration.regs_per_copy * 4.0).ceil() as u32;
        // 128*128/256 = 64 accumulators; warp tile 64x32: A 4*4, B 4*2, double buffered = 48.
        assert_eq!(r.accumulators, 64);
        assert_eq!(r.fragments, 48);
        let cal = &hw.calibration;
        assert_eq!(
            r.total,
            64 + 48 + cal.address_regs_per_thread + copies + cal.epilogue_regs_per_thread
        );
        assert_eq!(r.cap, 255);
        assert!(!r.spills);
    }

    #[test]
    fn one_warp_owning_128x128_spills() {
        let hw = preset("h200").unwrap();
        let r = analyze(&sm80_plan(128, 128, 1, 1), 2, &hw);
        assert_eq!(r.accumulators, 512);
        assert!(r.spills);
    }

    #[test]
    fn hopper_consumers_get_the_producers_registers() {
        let hw = preset("h200").unwrap();
        let mut plan = sm80_plan(128, 256, 2, 1);
        plan.backend = Backend::Sm90;
        plan.threads = ThreadLayout::Warpgroups {
            consumers: 2,
            split_m: 2,
        };
        let r = analyze(&plan, 2, &hw);
        // The launch's 168 per thread: (384 * 168 - 40 * 128) / 256 = 232; accumulators
        // 128*256/256 = 128.
        assert_eq!(r.cap, 232);
        assert_eq!(r.accumulators, 128);
        assert_eq!(r.fragments, 0);
    }
}
