//! The analytical performance model: (spec, plan, shape) -> [`Prediction`]. See shared MODEL.md.
//!
//! Four layers, each its own module with its own tests: [`movement`] (bytes per memory level),
//! [`registers`] (per-thread registers and spills), [`schedule`] (math rate, occupancy, waves,
//! pipeline depth) and [`sync`] (barriers, epilogue exposure). [`predict`] combines them per wave:
//!
//! ```text
//! wave time = max(compute, DRAM, L2 -> smem, smem -> registers, load-latency chain)
//!           + exposed prologue/epilogue + barriers
//! time      = sum over waves + launch overhead (+ the repack pass, when the plan needs one)
//! ```
//!
//! Every constant comes from the [`Hardware`] description (its fields and its `calibration`
//! block), so recalibrating the model changes a hardware file, never this code.

pub mod movement;
pub mod registers;
pub mod schedule;
pub mod sync;

use crate::dtype::DType;
use crate::hw::Hardware;
use crate::plan::{Backend, Plan, Shape, Tile};
use crate::spec::{KernelSpec, Layout, Observable, Role, ScaleGranularity};
use serde::{Deserialize, Serialize};

pub use movement::Movement;
pub use registers::Registers;
pub use schedule::{MathRate, Occupancy, OccupancyLimit, Waves};
pub use sync::Sync;

/// What bounds the predicted time: the largest share of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// Tensor-core / FFMA throughput.
    Compute,
    /// DRAM bandwidth.
    Dram,
    /// L2 -> shared-memory bandwidth.
    L2,
    /// Shared-memory bandwidth (tile copies and fragment loads).
    Smem,
    /// Load latency not covered by the pipeline's stages.
    Latency,
    /// Main-loop barriers.
    Sync,
    /// Pipeline fill and epilogue stores not overlapped with math.
    PrologueEpilogue,
    /// The fixed cost of launching.
    Launch,
    /// The pass that copies misaligned operands into an aligned workspace.
    Repack,
}

impl Bottleneck {
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::Compute => "compute",
            Bottleneck::Dram => "dram",
            Bottleneck::L2 => "l2",
            Bottleneck::Smem => "smem",
            Bottleneck::Latency => "latency",
            Bottleneck::Sync => "sync",
            Bottleneck::PrologueEpilogue => "prologue/epilogue",
            Bottleneck::Launch => "launch",
            Bottleneck::Repack => "repack",
        }
    }

    /// The model layer that accounts for this bottleneck.
    pub fn layer(self) -> &'static str {
        match self {
            Bottleneck::Dram | Bottleneck::L2 | Bottleneck::Smem | Bottleneck::Repack => {
                "data movement"
            }
            Bottleneck::Compute | Bottleneck::Latency | Bottleneck::PrologueEpilogue => {
                "scheduling"
            }
            Bottleneck::Sync => "synchronization",
            Bottleneck::Launch => "launch overhead",
        }
    }

    /// Whether the time is set by moving bytes rather than by math.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Bottleneck::Dram
                | Bottleneck::L2
                | Bottleneck::Smem
                | Bottleneck::Latency
                | Bottleneck::Repack
        )
    }
}

impl std::fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operand facts of a spec the model needs, for one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub shape: Shape,
    pub a: DType,
    pub b: DType,
    pub d: DType,
    pub c: Option<DType>,
    pub a_layout: Layout,
    pub b_layout: Layout,
    /// Bytes per output row of the `[M]` vectors the epilogue reads.
    pub row_vector_bytes: u32,
    /// Bytes per output column of the `[N]` vectors the epilogue reads.
    pub col_vector_bytes: u32,
    /// Whether A or B has K-block scales (1x128 / 128x128 fp8 blocks), which the kernel applies
    /// to every k-tile's partial sums.
    pub k_block_scaled: bool,
}

impl Problem {
    pub fn new(spec: &KernelSpec, shape: Shape) -> Problem {
        let a = spec.a();
        let b = spec.b();
        let vector_bytes = |role: Role| -> u32 {
            spec.operands
                .iter()
                .filter(|o| o.role == role)
                .map(|o| o.dtype.size_bytes())
                .sum()
        };
        Problem {
            shape,
            a: a.dtype,
            b: b.dtype,
            d: spec.d().dtype,
            c: spec.c().map(|c| c.dtype),
            a_layout: a.layout,
            b_layout: b.layout,
            row_vector_bytes: vector_bytes(Role::RowVector),
            col_vector_bytes: vector_bytes(Role::ColVector),
            k_block_scaled: spec.operands.iter().any(|o| {
                matches!(
                    o.role,
                    Role::Scale {
                        granularity: ScaleGranularity::Block1x128 | ScaleGranularity::Block128x128,
                        ..
                    }
                )
            }),
        }
    }

    pub fn a_bytes(&self) -> f64 {
        self.shape.m as f64 * self.shape.k as f64 * self.a.size_bytes() as f64
    }

    pub fn b_bytes(&self) -> f64 {
        self.shape.k as f64 * self.shape.n as f64 * self.b.size_bytes() as f64
    }

    /// The problem as `backend`'s kernel reads it: operands the launcher transposes in the
    /// other layout ([`crate::backend::BackendImpl::transposes`]).
    pub fn kernel_view(&self, backend: crate::plan::Backend) -> Problem {
        let [ta, tb] = crate::backend::transposed_problem_roles(self, backend);
        Problem {
            a_layout: if ta {
                self.a_layout.transposed()
            } else {
                self.a_layout
            },
            b_layout: if tb {
                self.b_layout.transposed()
            } else {
                self.b_layout
            },
            ..self.clone()
        }
    }

    /// Whether A's leading dimension (K for `row`, M for `col`) is a whole number of copies.
    pub fn a_aligned(&self, copy_bytes: u32) -> bool {
        let ld = match self.a_layout {
            Layout::Row => self.shape.k,
            Layout::Col => self.shape.m,
        };
        (ld * self.a.size_bytes() as u64).is_multiple_of(copy_bytes.max(1) as u64)
    }

    /// Whether B's leading dimension (K for `col`, N for `row`) is a whole number of copies.
    pub fn b_aligned(&self, copy_bytes: u32) -> bool {
        let ld = match self.b_layout {
            Layout::Col => self.shape.k,
            Layout::Row => self.shape.n,
        };
        (ld * self.b.size_bytes() as u64).is_multiple_of(copy_bytes.max(1) as u64)
    }
}

/// The bound no kernel of this spec can pass at one shape: the best dense math peak any backend
/// has for its inputs on this hardware, and the DRAM roof when each operand is read once and the
/// output written once. What `bench` reports "% of roofline" against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// FLOP per byte of compulsory DRAM traffic.
    pub intensity: f64,
    pub peak_tflops: f64,
    pub dram_tbps: f64,
    /// min(peak, intensity x DRAM bandwidth).
    pub tflops: f64,
}

impl Roofline {
    pub fn new(spec: &KernelSpec, shape: Shape) -> Roofline {
        let hw = &spec.hardware;
        let problem = Problem::new(spec, shape);
        let (m, n) = (shape.m as f64, shape.n as f64);
        let output_bytes = m * n * problem.d.size_bytes() as f64;
        let c_bytes = problem.c.map_or(0.0, |c| m * n * c.size_bytes() as f64);
        let bytes = problem.a_bytes() + problem.b_bytes() + output_bytes + c_bytes;
        let intensity = shape.flops() / bytes.max(1.0);
        let peak_tflops = Backend::ALL
            .into_iter()
            .filter_map(|backend| {
                hw.mma_rate(schedule::math_dtype(problem.a, backend), backend)
                    .map(|rate| {
                        rate.dense_flops_per_clk_per_sm * hw.sms as f64 * hw.clock_mhz as f64 * 1e-6
                    })
            })
            .fold(0.0, f64::max);
        let dram_tbps = hw.dram_bw_gbps * 1e-3;
        Roofline {
            intensity,
            peak_tflops,
            dram_tbps,
            tflops: peak_tflops.min(intensity * dram_tbps),
        }
    }
}

/// How a plan's tiles cover a shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Geometry {
    pub tiles_m: u64,
    pub tiles_n: u64,
    /// Output tiles: tiles_m x tiles_n.
    pub tiles: u64,
    pub split_k: u64,
    /// Blocks launched: tiles x split_k.
    pub blocks: u64,
    /// K elements one block reduces (K / split_k, rounded up).
    pub k_per_block: u64,
    /// Main-loop iterations of one block.
    pub k_blocks: u64,
    /// Average rows and columns of real data per tile (edge tiles are partial).
    pub rows_per_tile: f64,
    pub cols_per_tile: f64,
}

impl Geometry {
    pub fn new(shape: Shape, tile: Tile, split_k: u32) -> Geometry {
        let (m, n, k) = (shape.m.max(1), shape.n.max(1), shape.k.max(1));
        let tiles_m = m.div_ceil(tile.m.max(1) as u64);
        let tiles_n = n.div_ceil(tile.n.max(1) as u64);
        let split_k = split_k.max(1) as u64;
        let k_per_block = k.div_ceil(split_k);
        Geometry {
            tiles_m,
            tiles_n,
            tiles: tiles_m * tiles_n,
            split_k,
            blocks: tiles_m * tiles_n * split_k,
            k_per_block,
            k_blocks: k_per_block.div_ceil(tile.k.max(1) as u64),
            rows_per_tile: m as f64 / tiles_m as f64,
            cols_per_tile: n as f64 / tiles_n as f64,
        }
    }
}

/// The scheduling layer's figures for one plan on one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub math: MathRate,
    /// Dense peak of the plan's instruction over the whole GPU, TFLOP/s.
    pub peak_tflops: f64,
    pub occupancy: Occupancy,
    pub geometry: Geometry,
    pub waves: Waves,
    /// FLOPs one block issues, padding included.
    pub flops_per_block: f64,
    /// Math time summed over waves (the busiest SM of each), microseconds.
    pub compute_us: f64,
    /// Latency of one k-block's loads (L2 hits and DRAM misses mixed), cycles.
    pub load_latency_cycles: f64,
    /// Stages that would hide `load_latency_cycles` at the full wave's k-block time.
    pub stages_needed: u32,
    /// Whether the main loop of a full wave is bound by load latency (too few stages/blocks).
    pub latency_bound: bool,
    /// Exposed pipeline fill and epilogue, summed over waves, microseconds.
    pub prologue_epilogue_us: f64,
}

/// Where the predicted time goes, microseconds (these add up to `time_us`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Main-loop time summed over waves, each wave at its binding level.
    pub mainloop_us: f64,
    /// The part of `mainloop_us` bound by each level (compute, dram, l2, smem, latency).
    pub mainloop_by_bound: Vec<(Bottleneck, f64)>,
    pub prologue_epilogue_us: f64,
    pub sync_us: f64,
    pub launch_us: f64,
    pub repack_us: f64,
}

/// Achieved fraction of each roof: the rate the plan reaches over the whole predicted time,
/// divided by the hardware's peak at that level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Roofs {
    /// Of the dense peak of the plan's math instruction.
    pub compute: f64,
    pub dram: f64,
    pub l2: f64,
    pub smem: f64,
}

/// The observables of SPEC.md §2, on which constraints are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observables {
    /// Shared memory per block, bytes.
    pub smem: f64,
    /// Registers per (math) thread.
    pub registers: f64,
    /// Resident blocks per SM.
    pub occupancy: f64,
    /// Achieved fraction of the plan's math-instruction peak.
    pub tensor_util: f64,
    pub l2_hit_rate: f64,
    pub dram_bytes: f64,
    /// blocks / (SMs x blocks per SM).
    pub waves: f64,
    pub predicted_us: f64,
    pub tflops: f64,
    pub use_tensor_cores: bool,
    /// Whether K is not a multiple of the K tile (the last k-block is zero-filled).
    pub pad_k: bool,
    /// Operands the launcher transposes into the kernel's layout before each launch.
    #[serde(default)]
    pub transposes: u32,
    pub backend: Backend,
}

/// The value of one observable: a number (flags are 0 or 1) or a backend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ObservableValue {
    Number(f64),
    Backend(Backend),
}

impl Observables {
    pub fn get(&self, observable: Observable) -> ObservableValue {
        use ObservableValue::Number;
        let flag = |b: bool| Number(if b { 1.0 } else { 0.0 });
        match observable {
            Observable::Smem => Number(self.smem),
            Observable::Registers => Number(self.registers),
            Observable::Occupancy => Number(self.occupancy),
            Observable::TensorUtil => Number(self.tensor_util),
            Observable::L2HitRate => Number(self.l2_hit_rate),
            Observable::DramBytes => Number(self.dram_bytes),
            Observable::Waves => Number(self.waves),
            Observable::PredictedUs => Number(self.predicted_us),
            Observable::Tflops => Number(self.tflops),
            Observable::UseTensorCores => flag(self.use_tensor_cores),
            Observable::PadK => flag(self.pad_k),
            Observable::Transposes => Number(self.transposes as f64),
            Observable::Backend => ObservableValue::Backend(self.backend),
        }
    }
}

/// The model's prediction for one plan on one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub shape: Shape,
    pub time_us: f64,
    /// Useful FLOPs (2MNK) per predicted second, in TFLOP/s.
    pub tflops: f64,
    pub bottleneck: Bottleneck,
    pub roofs: Roofs,
    pub breakdown: Breakdown,
    pub movement: Movement,
    pub registers: Registers,
    pub schedule: Schedule,
    pub sync: Sync,
    pub observables: Observables,
}

/// Predict `plan` computing `spec` at `shape` on `spec.hardware`.
pub fn predict(spec: &KernelSpec, plan: &Plan, shape: Shape) -> Prediction {
    predict_problem(&Problem::new(spec, shape), plan, &spec.hardware)
}

/// [`predict`] for an already extracted [`Problem`] (the search reuses one per bucket).
pub fn predict_problem(problem: &Problem, plan: &Plan, hw: &Hardware) -> Prediction {
    let shape = problem.shape;
    // The GEMM reads a transposed operand in the kernel's layout (the pass is in `movement`).
    let transposed = crate::backend::transposed_problem_roles(problem, plan.backend);
    let kernel_problem = problem.kernel_view(plan.backend);
    let problem = &kernel_problem;
    let mut geo = Geometry::new(shape, plan.tile, plan.split_k);
    // A cluster's blocks take vertically adjacent tiles: an odd tile row count leaves the last
    // cluster's second block without a tile, but it holds an SM all the same (one tile row of a
    // decode-sized M: half the grid).
    let cluster_m = plan.cluster_m.max(1) as u64;
    geo.blocks = geo.tiles_m.next_multiple_of(cluster_m) * geo.tiles_n * geo.split_k;
    let regs = registers::analyze(plan, problem.a.size_bytes(), hw);
    let smem_bytes = plan.smem_bytes();
    let occupancy = schedule::occupancy(plan, smem_bytes, regs.total, hw);
    let blocks_per_sm = occupancy.blocks_per_sm.max(1);
    let waves = schedule::waves(geo.blocks, hw.sms, blocks_per_sm);
    let mv = movement::analyze(problem, transposed, plan, &geo, waves.wave_blocks, hw);
    let implementation = crate::backend::of(plan.backend);
    let math_dtype = implementation.plan_math_dtype(problem.a, plan);
    let math = schedule::rate_of(hw, math_dtype, plan.backend);
    let mut sync = sync::barriers(
        plan,
        geo.k_blocks,
        problem.k_block_scaled,
        problem.a.size_bytes(),
        hw,
    );

    let cal = &hw.calibration;
    let clock_mhz = hw.clock_mhz as f64;
    let flops_per_block =
        2.0 * plan.tile.m as f64 * plan.tile.n as f64 * plan.tile.k as f64 * geo.k_blocks as f64;
    let math_warps_per_block = plan.threads.math_threads() as f64 / hw.warp_size as f64;
    // Memory latency grows with load: a grid that fills the GPU waits the loaded latencies, one
    // that keeps a few SMs busy little more than the idle ones.
    let (dram_latency_cycles, l2_latency_cycles) = hw
        .latencies
        .at_load(geo.blocks as f64 / hw.sms.max(1) as f64);
    let round_trip_cycles = implementation.load_round_trip_cycles(hw);
    let load_latency_cycles = mv.l2_hit_rate * l2_latency_cycles
        + (1.0 - mv.l2_hit_rate) * dram_latency_cycles
        + round_trip_cycles;
    let figures = cal.backends.get(plan.backend);
    // Bytes per microsecond; a backend that streams through registers sustains less of DRAM's.
    let dram_bw = hw.dram_bw_gbps
        * 1e3
        * cal.dram_efficiency
        * figures.stream_efficiency.unwrap_or(1.0)
        * implementation.stream_share(plan);
    let l2_bw = hw.l2_bw_gbps * 1e3 * figures.l2_efficiency;
    let smem_bw_per_sm = hw.smem_bw_bytes_per_clk_per_sm * figures.smem_efficiency; // per cycle

    // DRAM operand bytes are spread over blocks in proportion (the per-wave panel count is folded
    // into the total); a persistent kernel's epilogue stores stream alongside the main loop.
    let streamed_dram_per_block = (mv.operand_dram_bytes
        + if plan.persistent {
            mv.epilogue_dram_bytes
        } else {
            0.0
        })
        / geo.blocks.max(1) as f64;

    let wave = |blocks: u64| -> WaveCost {
        let per_sm = blocks.div_ceil(hw.sms as u64).max(1);
        let per_sm_f = per_sm as f64;
        let saturation = schedule::warp_saturation(per_sm_f * math_warps_per_block, hw);
        let compute_cycles =
            per_sm_f * flops_per_block / (math.sustained_flops_per_clk_per_sm() * saturation);
        let smem_cycles = per_sm_f * mv.block_smem_bytes / smem_bw_per_sm;
        let one_block_saturation = schedule::warp_saturation(math_warps_per_block, hw);
        let kblock_compute_cycles = flops_per_block
            / geo.k_blocks.max(1) as f64
            / (math.sustained_flops_per_clk_per_sm() * one_block_saturation);
        let latency_cycles = geo.k_blocks as f64
            * schedule::latency_period_cycles(
                load_latency_cycles,
                plan.stages,
                smem_cycles / geo.k_blocks.max(1) as f64,
                kblock_compute_cycles,
            );
        let levels = [
            (Bottleneck::Compute, compute_cycles / clock_mhz),
            (
                Bottleneck::Dram,
                blocks as f64 * streamed_dram_per_block / dram_bw,
            ),
            (Bottleneck::L2, blocks as f64 * mv.block_l2_bytes / l2_bw),
            (Bottleneck::Smem, smem_cycles / clock_mhz),
            (Bottleneck::Latency, latency_cycles / clock_mhz),
        ];
        // Without the latency chain: the period the resources alone would allow.
        let resource_us = levels[..4].iter().map(|l| l.1).fold(0.0, f64::max);
        let (bound, mainloop_us) =
            levels
                .iter()
                .copied()
                .fold((Bottleneck::Compute, 0.0), |best, level| {
                    if level.1 > best.1 {
                        level
                    } else {
                        best
                    }
                });
        // Pipeline fill (one load latency) and the epilogue's stores (their bytes at the DRAM
        // rate plus one store latency); co-resident blocks overlap each other's.
        let prologue_us = load_latency_cycles / clock_mhz;
        let epilogue_us =
            blocks as f64 * mv.block_epilogue_bytes / dram_bw + dram_latency_cycles / clock_mhz;
        WaveCost {
            compute_us: levels[0].1,
            mainloop_us,
            bound,
            kblock_cycles: resource_us * clock_mhz / geo.k_blocks.max(1) as f64,
            prologue_epilogue_us: (prologue_us + epilogue_us) / per_sm_f,
            // Between tiles of a persistent loop the stores drain behind the next tile's math:
            // only their issue at the DRAM rate stops it, not their latency.
            epilogue_stores_us: blocks as f64 * mv.block_epilogue_bytes / dram_bw / per_sm_f,
            first_and_last_us: prologue_us + epilogue_us,
            sync_us: sync::exposed_cycles_per_wave(&sync, per_sm) / clock_mhz,
        }
    };

    let mut wave_costs = Vec::with_capacity(2);
    if waves.full_waves > 0 {
        wave_costs.push((waves.full_waves, wave(waves.wave_blocks)));
    }
    if waves.last_wave_blocks > 0 {
        wave_costs.push((1, wave(waves.last_wave_blocks)));
    }

    let mut by_bound: Vec<(Bottleneck, f64)> = Vec::new();
    let (mut mainloop_us, mut prologue_epilogue_us, mut sync_us, mut compute_us) =
        (0.0, 0.0, 0.0, 0.0);
    // A cooperative persistent kernel's stop for the epilogue of its last tile round: that one is
    // the drain, which `first_and_last_us` counts below.
    let mut last_round_stop_us = 0.0;
    for (count, cost) in &wave_costs {
        let count = *count as f64;
        mainloop_us += count * cost.mainloop_us;
        sync_us += count * cost.sync_us;
        if !plan.persistent {
            prologue_epilogue_us += count * cost.prologue_epilogue_us;
        } else if !sync.epilogue_hidden {
            // A cooperative persistent kernel stops its math for every tile's epilogue (the
            // producer refills the ring meanwhile, so the fill is paid once), or for what of it
            // the next tile's first k-tile does not cover.
            let covered_us = if sync.epilogue_under_next_k_tile {
                cost.kblock_cycles / clock_mhz
            } else {
                0.0
            };
            last_round_stop_us = (cost.epilogue_stores_us - covered_us).max(0.0);
            prologue_epilogue_us += count * last_round_stop_us;
        }
        match by_bound.iter_mut().find(|(b, _)| *b == cost.bound) {
            Some(entry) => entry.1 += count * cost.mainloop_us,
            None => by_bound.push((cost.bound, count * cost.mainloop_us)),
        }
        compute_us += count * cost.compute_us;
    }
    if plan.persistent {
        // Filled once, drained once; the tile loop hides the other fills.
        prologue_epilogue_us +=
            wave_costs.first().map_or(0.0, |(_, c)| c.first_and_last_us) - last_round_stop_us;
    }
    sync.exposed_us = sync_us;
    let repack_us = if mv.repack_dram_bytes > 0.0 {
        let launches = mv
            .repack_copies
            .div_ceil(crate::codegen::REPACK_COPIES_PER_LAUNCH)
            + mv.transposes;
        mv.repack_us + cal.queued_launch_us * launches as f64
    } else {
        0.0
    };
    // A short kernel (tiny) saves part of the overhead that long ones pay.
    let launch_us = cal.launch_overhead_us - figures.launch_saving_us.unwrap_or(0.0);
    let time_us = mainloop_us + prologue_epilogue_us + sync_us + launch_us + repack_us;

    let mut shares = by_bound.clone();
    shares.extend([
        (Bottleneck::PrologueEpilogue, prologue_epilogue_us),
        (Bottleneck::Sync, sync_us),
        (Bottleneck::Launch, launch_us),
        (Bottleneck::Repack, repack_us),
    ]);
    let bottleneck = shares
        .iter()
        .fold((Bottleneck::Launch, f64::NEG_INFINITY), |best, &(b, t)| {
            if t > best.1 {
                (b, t)
            } else {
                best
            }
        })
        .0;

    let full = wave_costs.first().map(|(_, c)| c);
    let kblock_cycles = full.map_or(0.0, |c| c.kblock_cycles);
    let useful_flops = shape.flops();
    let tflops = useful_flops / time_us * 1e-6;
    let peak_tflops = math.peak_tflops(hw);
    let roofs = Roofs {
        compute: tflops / peak_tflops,
        dram: mv.dram_bytes / time_us / (hw.dram_bw_gbps * 1e3),
        l2: mv.l2_to_smem_bytes / time_us / (hw.l2_bw_gbps * 1e3),
        smem: mv.smem_bytes
            / time_us
            / (hw.smem_bw_bytes_per_clk_per_sm * hw.sms as f64 * clock_mhz),
    };
    let observables = Observables {
        smem: smem_bytes as f64,
        registers: regs.total as f64,
        occupancy: occupancy.blocks_per_sm as f64,
        tensor_util: roofs.compute,
        l2_hit_rate: mv.l2_hit_rate,
        dram_bytes: mv.dram_bytes,
        waves: waves.waves,
        predicted_us: time_us,
        tflops,
        // A plan whose math is f32 runs it on the CUDA cores (gemv's narrow tiles).
        use_tensor_cores: plan.backend.uses_tensor_cores(problem.a) && math_dtype != DType::F32,
        pad_k: !geo.k_per_block.is_multiple_of(plan.tile.k.max(1) as u64),
        transposes: mv.transposes,
        backend: plan.backend,
    };
    Prediction {
        shape,
        time_us,
        tflops,
        bottleneck,
        roofs,
        breakdown: Breakdown {
            mainloop_us,
            mainloop_by_bound: by_bound,
            prologue_epilogue_us,
            sync_us,
            launch_us,
            repack_us,
        },
        schedule: Schedule {
            math,
            peak_tflops,
            occupancy,
            geometry: geo,
            waves,
            flops_per_block,
            compute_us,
            load_latency_cycles,
            stages_needed: schedule::stages_needed(load_latency_cycles, kblock_cycles),
            latency_bound: full.is_some_and(|c| c.bound == Bottleneck::Latency),
            prologue_epilogue_us,
        },
        movement: mv,
        registers: regs,
        sync,
        observables,
    }
}

/// The cost of one wave of blocks.
struct WaveCost {
    compute_us: f64,
    mainloop_us: f64,
    bound: Bottleneck,
    /// Time between k-blocks of one block that the resources (not latency) allow, cycles.
    kblock_cycles: f64,
    /// Fill + drain, as exposed with the wave's co-resident blocks overlapping each other.
    prologue_epilogue_us: f64,
    /// The epilogue's stores at the DRAM rate, likewise (what a cooperative persistent kernel
    /// stops its math for between tiles).
    epilogue_stores_us: f64,
    /// Fill + drain of one block, unoverlapped (what a persistent kernel pays once).
    first_and_last_us: f64,
    sync_us: f64,
}
