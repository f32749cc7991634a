//! Scheduling layer: how fast the math runs and how blocks map onto SMs.
//!
//! - math rate: the dense FLOP/clk/SM of the plan's instruction for the dtype (`hw.mma`) times
//!   the backend's calibrated efficiency, scaled down when too few warps are resident to keep
//!   every scheduler partition busy;
//! - occupancy: blocks per SM from shared memory, registers, threads and the block limit;
//! - wave quantization: blocks / (SMs x blocks per SM), the last wave's fill and busy SMs;
//! - pipeline depth: a block's k-block loads must be issued `stages - 1` k-blocks ahead, so the
//!   main loop cannot run faster than one k-block per `latency / (stages - 1)`; the stages needed
//!   to hide the latency are `ceil(latency / k-block time) + 1`.

use crate::dtype::DType;
use crate::hw::Hardware;
use crate::plan::{Backend, Plan};
use serde::{Deserialize, Serialize};

/// What limits the number of blocks resident on one SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OccupancyLimit {
    Smem,
    Registers,
    Threads,
    Blocks,
    /// A persistent kernel launches one block per SM by design.
    Persistent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub limit: OccupancyLimit,
}

/// Resident blocks per SM. Zero when one block does not fit at all.
pub fn occupancy(plan: &Plan, smem_bytes: u32, regs_per_thread: u32, hw: &Hardware) -> Occupancy {
    if plan.persistent {
        return Occupancy {
            blocks_per_sm: 1,
            limit: OccupancyLimit::Persistent,
        };
    }
    let threads = plan.threads.threads().max(1);
    let block_regs = super::registers::allocated(regs_per_thread) * threads;
    let limits = [
        (
            OccupancyLimit::Smem,
            hw.smem_per_sm_bytes
                .checked_div(smem_bytes)
                .unwrap_or(u32::MAX),
        ),
        (
            OccupancyLimit::Registers,
            hw.regs_per_sm.checked_div(block_regs).unwrap_or(u32::MAX),
        ),
        (OccupancyLimit::Threads, hw.max_threads_per_sm / threads),
        (OccupancyLimit::Blocks, hw.max_blocks_per_sm),
    ];
    let (limit, blocks_per_sm) = limits
        .into_iter()
        .min_by_key(|&(_, n)| n)
        .expect("the list is not empty");
    Occupancy {
        blocks_per_sm,
        limit,
    }
}

/// How the blocks of one launch fall into waves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Waves {
    /// Blocks that run at once: SMs x blocks per SM.
    pub wave_blocks: u64,
    /// blocks / wave_blocks: the `waves` observable (1.94 means a second wave at 94%).
    pub waves: f64,
    pub full_waves: u64,
    /// Blocks of the final, partial wave (0 when the last wave is full).
    pub last_wave_blocks: u64,
    /// SMs with work in the last wave (all of them when it is full).
    pub last_wave_busy_sms: u64,
    /// Waves launched: full waves plus a partial one if any.
    pub launched: u64,
}

pub fn waves(blocks: u64, sms: u32, blocks_per_sm: u32) -> Waves {
    let wave_blocks = (sms as u64 * blocks_per_sm.max(1) as u64).max(1);
    let full_waves = blocks / wave_blocks;
    let last_wave_blocks = blocks % wave_blocks;
    let last_wave_busy_sms = if last_wave_blocks == 0 {
        sms as u64
    } else {
        last_wave_blocks.min(sms as u64)
    };
    Waves {
        wave_blocks,
        waves: blocks as f64 / wave_blocks as f64,
        full_waves,
        last_wave_blocks,
        last_wave_busy_sms,
        launched: full_waves + u64::from(last_wave_blocks > 0),
    }
}

/// The math instruction's dtype: SIMT computes in f32, tensor cores in the input dtype. f32
/// inputs have no tensor-core rate: they are computed on the CUDA cores, `tf32` ones on the
/// tensor cores.
pub fn math_dtype(input: DType, backend: Backend) -> DType {
    crate::backend::of(backend).math_dtype(input)
}

/// The sustained math rate of a plan's instruction family on this hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MathRate {
    pub instruction: String,
    /// Dense peak of the instruction, FLOP per clock per SM.
    pub peak_flops_per_clk_per_sm: f64,
    /// Calibrated fraction of the peak a well-fed main loop sustains.
    pub efficiency: f64,
}

impl MathRate {
    /// FLOP (2 per multiply-add) per clock per SM a main loop sustains.
    pub fn sustained_flops_per_clk_per_sm(&self) -> f64 {
        self.peak_flops_per_clk_per_sm * self.efficiency
    }

    /// Dense peak of the whole GPU in TFLOP/s.
    pub fn peak_tflops(&self, hw: &Hardware) -> f64 {
        self.peak_flops_per_clk_per_sm * hw.sms as f64 * hw.clock_mhz as f64 * 1e-6
    }
}

/// The rate of `backend` for `input`. A backend the hardware has no rate for (the search never
/// proposes one) is predicted at the slowest rate the hardware lists.
pub fn math_rate(hw: &Hardware, input: DType, backend: Backend) -> MathRate {
    rate_of(hw, math_dtype(input, backend), backend)
}

/// The rate of `backend`'s instruction for math in `math` (one plan's: a backend's plans may
/// sum on different units, `BackendImpl::plan_math_dtype`).
pub fn rate_of(hw: &Hardware, math: DType, backend: Backend) -> MathRate {
    let cal = &hw.calibration;
    let efficiency = cal.backends.get(backend).mma_efficiency;
    let rate = hw.mma_rate(math, backend).or_else(|| {
        hw.mma.iter().min_by(|a, b| {
            a.dense_flops_per_clk_per_sm
                .total_cmp(&b.dense_flops_per_clk_per_sm)
        })
    });
    match rate {
        Some(r) => MathRate {
            instruction: r.instruction.clone(),
            peak_flops_per_clk_per_sm: r.dense_flops_per_clk_per_sm,
            efficiency,
        },
        // Validation guarantees at least one rate; an empty list predicts nothing can run.
        None => MathRate {
            instruction: String::from("none"),
            peak_flops_per_clk_per_sm: f64::MIN_POSITIVE,
            efficiency,
        },
    }
}

/// Fraction of the SM's math pipes that `resident_warps` math warps keep busy.
pub fn warp_saturation(resident_warps: f64, hw: &Hardware) -> f64 {
    (resident_warps / hw.calibration.warps_for_peak_math).clamp(f64::MIN_POSITIVE, 1.0)
}

/// Cycles between k-blocks of one block when only load latency limits it: the loads of
/// `stages - 1` k-blocks overlap; a single stage loads and computes in turn, so each k-block
/// waits the latency, then its bytes' passage into the registers (`kblock_transfer_cycles`, the
/// co-resident blocks' k-blocks through L1 and shared memory), then its math.
pub fn latency_period_cycles(
    latency_cycles: f64,
    stages: u32,
    kblock_transfer_cycles: f64,
    kblock_compute_cycles: f64,
) -> f64 {
    if stages <= 1 {
        latency_cycles + kblock_transfer_cycles + kblock_compute_cycles
    } else {
        latency_cycles / (stages - 1) as f64
    }
}

/// Stages needed so that loads issued ahead cover the latency: ceil(latency / period) + 1.
pub fn stages_needed(latency_cycles: f64, kblock_cycles: f64) -> u32 {
    if kblock_cycles <= 0.0 {
        return 2;
    }
    (latency_cycles / kblock_cycles).ceil().max(1.0) as u32 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek's example: M=256, N=7168, BLOCK_M=128 on 132 SMs. BLOCK_N=112 gives 2 x 64 = 128
    /// tiles (128 busy SMs), BLOCK_N=128 gives 2 x 56 = 112 tiles (112 busy SMs); one wave each.
    #[test]
    fn block_n_112_fills_more_sms_than_128() {
        let tiles = |bn: u64| 256u64.div_ceil(128) * 7168u64.div_ceil(bn);
        assert_eq!(tiles(112), 128);
        assert_eq!(tiles(128), 112);
        let w112 = waves(tiles(112), 132, 1);
        let w128 = waves(tiles(128), 132, 1);
        assert_eq!((w112.launched, w112.last_wave_busy_sms), (1, 128));
        assert_eq!((w128.launched, w128.last_wave_busy_sms), (1, 112));
        assert!((w112.waves - 128.0 / 132.0).abs() < 1e-12);
        assert!((w128.waves - 112.0 / 132.0).abs() < 1e-12);
    }

    #[test]
    fn full_and_partial_waves() {
        let w = waves(300, 132, 2);
        assert_eq!(w.wave_blocks, 264);
        assert_eq!((w.full_waves, w.last_wave_blocks, w.launched), (1, 36, 2));
        assert_eq!(w.last_wave_busy_sms, 36);
        let exact = waves(264, 132, 2);
        assert_eq!((exact.full_waves, exact.last_wave_blocks), (1, 0));
        assert_eq!(exact.last_wave_busy_sms, 132);
    }

    #[test]
    fn pipeline_depth_hides_latency() {
        // 800-cycle loads, 200-cycle k-blocks: 4 k-blocks in flight + the one computing.
        assert_eq!(stages_needed(800.0, 200.0), 5);
        assert_eq!(latency_period_cycles(800.0, 5, 100.0, 200.0), 200.0);
        assert_eq!(latency_period_cycles(800.0, 1, 100.0, 200.0), 1100.0);
    }

    #[test]
    fn math_rates_come_from_the_hardware_file() {
        let hw = crate::hw::preset("h200").unwrap();
        let r = math_rate(&hw, DType::Bf16, Backend::Sm90);
        assert_eq!(r.peak_flops_per_clk_per_sm, 4096.0);
        assert!((r.peak_tflops(&hw) - 989.4).abs() < 0.1);
        let tf32 = math_rate(&hw, DType::Tf32, Backend::Sm80);
        assert_eq!(tf32.instruction, "mma.sync.m16n8k8");
        assert_eq!(tf32.peak_flops_per_clk_per_sm, 1024.0);
        // f32 inputs have no tensor-core rate: the hardware lists only the CUDA cores' FFMA.
        assert_eq!(math_dtype(DType::F32, Backend::Sm80), DType::F32);
        assert!(hw.mma_rate(DType::F32, Backend::Sm80).is_none());
        assert!(hw.mma_rate(DType::F32, Backend::Sm90).is_none());
        let f32 = math_rate(&hw, DType::F32, Backend::Simt);
        assert_eq!(f32.instruction, "ffma");
        assert_eq!(f32.peak_flops_per_clk_per_sm, 256.0);
        assert_eq!(
            math_rate(&hw, DType::Bf16, Backend::Simt).instruction,
            "ffma"
        );
    }
}
