//! analysis.md / analysis.json: what the model and search decided, for humans and tools.
//!
//! [`Analysis::new`] builds the report from a [`SearchResult`]; [`render_markdown`] prints it
//! for `deepgemm explain` and `analysis.md`; `serde_json::to_string_pretty(&analysis)` gives
//! `analysis.json` / `explain --json`.
//!
//! # JSON schema (`schema_version` 2; fields are only ever added within a version)
//!
//! ```text
//! {
//!   "schema_version": 2,
//!   "kernel": "mlp_up",
//!   "hardware": {                     // the assumptions every number below rests on
//!     "name", "arch", "sms", "clock_mhz",
//!     "dram_bw_gbps", "l2_bw_gbps", "l2_bytes", "smem_per_block_bytes", "regs_per_sm",
//!     "max_regs_per_thread",
//!     "math": [ { "backend", "dtype", "instruction", "peak_tflops", "efficiency" } ],
//!     "calibration": { ...the hardware file's calibration block, every backend's figures in
//!                      "backends": { "sm90": {...}, "sm80": {...}, "simt": {...} } (version 2)... },
//!     "provenance": "measured" | "datasheet" | "unstated"  // the hardware file's field
//!   },
//!   "generated_backends": ["sm80", "simt"],
//!   "note": "The winner is the best plan of sm90 or sm80 or simt, ...", // the backends that
//!                                     // run here; any that are modelled but not generated
//!   "notes": ["f32 inputs are computed to f32 accuracy: ...", "slow path: ..."],
//!   "constraints": ["registers <= 255", ...],
//!   "buckets": [ {
//!     "bucket": { "m": [lo, hi], "n": [lo, hi], "k": [lo, hi] },
//!     "shape": { "m", "n", "k" },     // the shape planned for (the bucket's largest)
//!     "enumerated": 4102, "enumerated_by_backend": [["sm90", 2688], ...], "feasible": 1210,
//!     "pruning": [ { "rule", "kind": "tiling|hardware|constraint", "violated", "removed" } ],
//!     "winner": {
//!       "label", "plan": {...Plan...}, "prediction": {...model::Prediction, all four layers...},
//!       "bound_by": "compute", "layer": "scheduling",
//!       "margin_over_runner_up": 0.031,  // runner-up time / winner time - 1 (null if alone)
//!       "why": "..."
//!     },
//!     "best_by_backend": [ { "backend", "label", "predicted_us" } ],
//!     "constraint_costs": [ { "constraint", "without_plan", "without_us", "with_us",
//!                             "message" } ],   // hard constraints that slow the winner
//!     "candidates": [ { "rank", "label", "predicted_us", "tflops", "bottleneck", "smem_bytes",
//!                       "registers", "occupancy", "waves", "note" } ],
//!     "model_only": [ ...same rows, backends without a generator... ],
//!     "ptxas": { "registers", "model_registers", "blocks_per_sm", "limit", "waves" } // compile
//!                                     // with NVRTC only: occupancy at ptxas's count; else null
//!   } ]
//! }
//! ```

use crate::backend::{self, generated_backends};
use crate::hw::{Calibration, Hardware, Provenance};
use crate::model::schedule::{self, OccupancyLimit};
use crate::model::sync::Sync;
use crate::model::{Bottleneck, Prediction};
use crate::plan::{Backend, Plan, Shape, ShapeBucket};
use crate::search::{
    bucket_text, latency_slack, tie_break, Candidate, PruneCount, SearchResult, TieBreak,
};
use crate::spec::KernelSpec;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// 2: the per-backend calibration figures moved into `hardware.calibration.backends`.
pub const SCHEMA_VERSION: u32 = 2;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub schema_version: u32,
    pub kernel: String,
    pub hardware: HardwareAssumptions,
    pub generated_backends: Vec<Backend>,
    /// What the reader should know about the candidate set (model-only backends).
    pub note: String,
    /// How the inputs' precision is computed and any slow path (`search::paths::notes`).
    pub notes: Vec<String>,
    pub constraints: Vec<String>,
    pub buckets: Vec<BucketAnalysis>,
}

/// The hardware figures and calibration the predictions used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareAssumptions {
    pub name: String,
    pub arch: String,
    pub sms: u32,
    pub clock_mhz: u32,
    pub dram_bw_gbps: f64,
    pub l2_bw_gbps: f64,
    pub l2_bytes: u64,
    pub smem_per_block_bytes: u32,
    pub regs_per_sm: u32,
    pub max_regs_per_thread: u32,
    /// The math rate of every backend that can run the spec's inputs.
    pub math: Vec<MathAssumption>,
    pub calibration: Calibration,
    /// Whether the figures were calibrated from measurements or are datasheet figures.
    #[serde(default)]
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MathAssumption {
    pub backend: Backend,
    pub dtype: String,
    pub instruction: String,
    pub peak_tflops: f64,
    pub efficiency: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketAnalysis {
    pub bucket: ShapeBucket,
    pub shape: Shape,
    pub enumerated: usize,
    pub enumerated_by_backend: Vec<(Backend, usize)>,
    pub feasible: usize,
    pub pruning: Vec<PruneCount>,
    pub winner: Winner,
    pub candidates: Vec<CandidateRow>,
    pub model_only: Vec<CandidateRow>,
    pub best_by_backend: Vec<crate::search::BackendBest>,
    pub constraint_costs: Vec<crate::search::ConstraintCost>,
    /// ptxas's figures for the winner's compiled variant: written by `compile` with NVRTC,
    /// absent from `explain` (nothing is compiled).
    #[serde(default)]
    pub ptxas: Option<PtxasFigures>,
}

/// What ptxas allocated for a bucket's variant, and the occupancy that count gives: where it
/// differs from the model's register estimate, the kernel runs at these figures, not the
/// model's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtxasFigures {
    pub registers: u32,
    /// The model's estimate, for comparison.
    pub model_registers: u32,
    /// Resident blocks per SM at ptxas's count.
    pub blocks_per_sm: u32,
    pub limit: OccupancyLimit,
    /// Waves at that occupancy.
    pub waves: f64,
}

/// The chosen plan with the full four-layer prediction and why it won.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Winner {
    pub label: String,
    pub plan: Plan,
    pub prediction: Prediction,
    pub bound_by: Bottleneck,
    /// The model layer of `bound_by`.
    pub layer: String,
    /// Runner-up's predicted time / winner's - 1; `None` with a single feasible plan.
    pub margin_over_runner_up: Option<f64>,
    pub why: String,
}

/// One line of the candidate table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    pub rank: usize,
    pub label: String,
    pub predicted_us: f64,
    pub tflops: f64,
    pub bottleneck: Bottleneck,
    pub smem_bytes: u32,
    pub registers: u32,
    pub occupancy: u32,
    pub waves: f64,
    /// The trade-off against the winner, in words.
    pub note: String,
}

impl Analysis {
    /// The report for `result`, showing the `top` best candidates per bucket.
    pub fn new(spec: &KernelSpec, result: &SearchResult, top: usize) -> Analysis {
        let hw = &spec.hardware;
        let math = Backend::ALL
            .into_iter()
            .filter(|&b| backend::runs(spec, b))
            .map(|b| {
                let rate = schedule::math_rate(hw, spec.a().dtype, b);
                MathAssumption {
                    backend: b,
                    dtype: schedule::math_dtype(spec.a().dtype, b).to_string(),
                    peak_tflops: rate.peak_tflops(hw),
                    instruction: rate.instruction,
                    efficiency: rate.efficiency,
                }
            })
            .collect();

        Analysis {
            schema_version: SCHEMA_VERSION,
            kernel: result.kernel.clone(),
            hardware: assumptions(hw, math),
            generated_backends: generated_backends(),
            note: backends_note(spec),
            notes: crate::search::paths::notes(spec),
            constraints: spec.constraints.iter().map(|c| c.text.clone()).collect(),
            buckets: result
                .buckets
                .iter()
                .map(|b| {
                    let winner = &b.candidates[0];
                    BucketAnalysis {
                        bucket: b.bucket,
                        shape: b.shape,
                        enumerated: b.enumerated,
                        enumerated_by_backend: b.enumerated_by_backend.clone(),
                        feasible: b.feasible,
                        pruning: b.pruned.clone(),
                        winner: explain_winner(
                            spec,
                            winner,
                            b.candidates.get(1),
                            &b.best_by_backend,
                        ),
                        candidates: rows(&b.candidates, top, winner),
                        model_only: rows(&b.model_only, top.min(3), winner),
                        best_by_backend: b.best_by_backend.clone(),
                        constraint_costs: b.constraint_costs.clone(),
                        ptxas: None,
                    }
                })
                .collect(),
        }
    }
}

/// Which backends the winner was chosen from. Only backends that run on this target for these
/// inputs are named: an A100's report has nothing to say about sm90, generated or not.
fn backends_note(spec: &KernelSpec) -> String {
    let runs: Vec<Backend> = Backend::ALL
        .into_iter()
        .filter(|&b| backend::runs(spec, b))
        .collect();
    let names = |generated: bool| {
        let of_kind = runs
            .iter()
            .filter(|b| backend::of(**b).has_generator() == generated);
        of_kind.map(|b| b.name()).collect::<Vec<_>>().join(" or ")
    };
    let (generated, model_only) = (names(true), names(false));
    if model_only.is_empty() {
        format!(
            "The winner is the best plan of {generated}, every backend that runs these inputs on \
             {} being generated",
            spec.hardware.arch
        )
    } else {
        format!(
            "{model_only} plans are enumerated and predicted but not generated yet; the winner \
             is the best plan of {generated}"
        )
    }
}

impl Analysis {
    /// Records ptxas's register count for bucket `bucket`'s variant and the occupancy and waves
    /// it gives on `hw` (the model's occupancy rule, at the compiled count).
    pub fn record_ptxas(&mut self, bucket: usize, registers: u32, hw: &Hardware) {
        let Some(b) = self.buckets.get_mut(bucket) else {
            return;
        };
        let w = &b.winner;
        let occupancy = schedule::occupancy(&w.plan, w.plan.smem_bytes(), registers, hw);
        let blocks = w.prediction.schedule.geometry.blocks;
        let waves = schedule::waves(blocks, hw.sms, occupancy.blocks_per_sm).waves;
        b.ptxas = Some(PtxasFigures {
            registers,
            model_registers: w.prediction.registers.total,
            blocks_per_sm: occupancy.blocks_per_sm,
            limit: occupancy.limit,
            waves,
        });
    }
}

fn assumptions(hw: &Hardware, math: Vec<MathAssumption>) -> HardwareAssumptions {
    HardwareAssumptions {
        name: hw.name.clone(),
        arch: hw.arch.clone(),
        sms: hw.sms,
        clock_mhz: hw.clock_mhz,
        dram_bw_gbps: hw.dram_bw_gbps,
        l2_bw_gbps: hw.l2_bw_gbps,
        l2_bytes: hw.l2_bytes,
        smem_per_block_bytes: hw.smem_per_block_bytes,
        regs_per_sm: hw.regs_per_sm,
        max_regs_per_thread: hw.max_regs_per_thread,
        math,
        calibration: hw.calibration.clone(),
        provenance: hw.provenance,
    }
}

fn rows(candidates: &[Candidate], top: usize, winner: &Candidate) -> Vec<CandidateRow> {
    candidates
        .iter()
        .take(top)
        .enumerate()
        .map(|(i, c)| {
            let p = &c.prediction;
            CandidateRow {
                rank: i + 1,
                label: c.label.clone(),
                predicted_us: p.time_us,
                tflops: p.tflops,
                bottleneck: p.bottleneck,
                smem_bytes: c.plan.smem_bytes(),
                registers: p.registers.total,
                occupancy: p.schedule.occupancy.blocks_per_sm,
                waves: p.schedule.waves.waves,
                note: trade_off(c, winner),
            }
        })
        .collect()
}

/// What distinguishes `c` from the winner, biggest effect first.
fn trade_off(c: &Candidate, winner: &Candidate) -> String {
    if c.label == winner.label {
        return "chosen".to_string();
    }
    let (p, w) = (&c.prediction, &winner.prediction);
    let mut notes = Vec::new();
    let slower = p.time_us / w.time_us - 1.0;
    let dram = p.movement.dram_bytes / w.movement.dram_bytes - 1.0;
    let mut dram_noted = false;
    // Tied as the ranking sees it: the same score (time with any soft-constraint penalty).
    if c.score_us == winner.score_us {
        notes.push(match tie_break(winner, c).1 {
            TieBreak::IdleConsumer => "ties the winner; ping-pong with at most one tile a \
                                       block: its second consumer idles"
                .to_string(),
            TieBreak::StoreWait => "ties the winner; its epilogue warps wait for their TMA \
                                    stores (one buffer a warp)"
                .to_string(),
            TieBreak::LatencySlack => format!(
                "ties the winner; {} pipeline stage(s) of latency slack vs {}",
                latency_slack(c),
                latency_slack(winner)
            ),
            TieBreak::DramBytes => {
                dram_noted = true;
                format!(
                    "ties the winner; {:+.1}% DRAM bytes (ranked by DRAM bytes)",
                    dram * 100.0
                )
            }
            TieBreak::GroupedRaster => {
                "ties the winner; its twin in grouped raster order (ranked grouped first)"
                    .to_string()
            }
            TieBreak::Label => "ties the winner (ranked by label)".to_string(),
        });
    } else {
        notes.push(format!("{:+.1}% time", slower * 100.0));
    }
    if p.bottleneck != w.bottleneck {
        notes.push(format!("{}-bound", p.bottleneck));
    }
    if p.schedule.waves.launched != w.schedule.waves.launched
        || (p.schedule.waves.waves - w.schedule.waves.waves).abs() > 0.05
    {
        notes.push(format!(
            "{:.2} waves vs {:.2}",
            p.schedule.waves.waves, w.schedule.waves.waves
        ));
    }
    if dram.abs() > 0.05 && !dram_noted {
        notes.push(format!("{:+.0}% DRAM bytes", dram * 100.0));
    }
    if p.breakdown.repack_us > 0.0 && w.breakdown.repack_us == 0.0 {
        notes.push("needs a repack pass".to_string());
    }
    if c.soft_distance > winner.soft_distance {
        notes.push("further from the soft targets".to_string());
    }
    notes.join("; ")
}

fn explain_winner(
    spec: &KernelSpec,
    winner: &Candidate,
    runner_up: Option<&Candidate>,
    best_by_backend: &[crate::search::BackendBest],
) -> Winner {
    let p = &winner.prediction;
    let s = &p.schedule;
    let margin = runner_up.map(|r| r.prediction.time_us / p.time_us - 1.0);
    let mut why = format!(
        "{} is {}-bound ({} layer): {:.1} us, {:.0} TFLOP/s = {:.0}% of the {} peak; {} tiles in {:.2} waves of {} blocks ({} per SM, limited by {:?}); last wave keeps {} of {} SMs busy",
        winner.label,
        p.bottleneck,
        p.bottleneck.layer(),
        p.time_us,
        p.tflops,
        p.roofs.compute * 100.0,
        s.math.instruction,
        s.geometry.tiles,
        s.waves.waves,
        s.waves.wave_blocks,
        s.occupancy.blocks_per_sm,
        s.occupancy.limit,
        s.waves.last_wave_busy_sms,
        s.waves.wave_blocks / s.occupancy.blocks_per_sm.max(1) as u64,
    );
    if s.latency_bound {
        let _ = write!(
            why,
            "; load latency ({:.0} cycles) needs {} stages, the plan has {}",
            s.load_latency_cycles, s.stages_needed, winner.plan.stages
        );
    }
    match (margin, runner_up) {
        (Some(_), Some(r)) if r.score_us == winner.score_us => {
            let on = match tie_break(winner, r).1 {
                TieBreak::IdleConsumer => "no consumer idle (ping-pong with one tile a block)",
                TieBreak::StoreWait => "epilogue warps that do not wait for their TMA stores",
                TieBreak::LatencySlack => "more pipeline stages than its latency needs",
                TieBreak::DramBytes => "fewer DRAM bytes",
                TieBreak::GroupedRaster => "grouped raster order (measured faster in twin pairs)",
                TieBreak::Label => "label order",
            };
            let _ = write!(why, "; ties {} and wins on {on}", r.label);
        }
        (Some(m), Some(r)) if m < 1e-3 => {
            let _ = write!(
                why,
                "; within 0.1% of {}, which the model cannot tell apart",
                r.label
            );
        }
        (Some(m), Some(r)) => {
            let _ = write!(why, "; {:.1}% ahead of {}", m * 100.0, r.label);
        }
        _ => why.push_str("; the only feasible plan"),
    }
    why.push_str(&backend_choice(spec, winner, best_by_backend));
    Winner {
        label: winner.label.clone(),
        plan: winner.plan.clone(),
        prediction: p.clone(),
        bound_by: p.bottleneck,
        layer: p.bottleneck.layer().to_string(),
        margin_over_runner_up: margin,
        why,
    }
}

/// Why the winner's backend, against the best plan of each other generated backend; for f32
/// inputs also that they run on the CUDA cores.
fn backend_choice(
    spec: &KernelSpec,
    winner: &Candidate,
    best_by_backend: &[crate::search::BackendBest],
) -> String {
    let backend = winner.plan.backend;
    let input = spec.a().dtype;
    let mut out = String::new();
    if input == crate::dtype::DType::F32 {
        out.push_str(
            "; f32 accuracy by FFMA on the CUDA cores (`tf32` inputs take the tensor cores)",
        );
    }
    for other in best_by_backend.iter().filter(|b| b.backend != backend) {
        let _ = write!(
            out,
            "; the best {} plan ({}) takes {:.1} us ({:.2}x)",
            other.backend,
            other.label,
            other.predicted_us,
            other.predicted_us / winner.prediction.time_us
        );
    }
    out
}

/// analysis.md / `deepgemm explain`.
pub fn render_markdown(a: &Analysis) -> String {
    let mut out = String::new();
    let h = &a.hardware;
    let _ = writeln!(out, "# {} — analysis\n", a.kernel);
    let _ = writeln!(out, "## Hardware assumptions ({}, {})\n", h.name, h.arch);
    let _ = writeln!(
        out,
        "{} SMs at {} MHz; DRAM {} GB/s x {:.2} sustained; L2 {} MiB, {} GB/s; smem {} B per block; {} registers per SM, at most {} per thread; launch {} us.\n",
        h.sms,
        h.clock_mhz,
        h.dram_bw_gbps,
        h.calibration.dram_efficiency,
        h.l2_bytes >> 20,
        h.l2_bw_gbps,
        h.smem_per_block_bytes,
        h.regs_per_sm,
        h.max_regs_per_thread,
        h.calibration.launch_overhead_us
    );
    let _ = writeln!(out, "Figures: {} ({}).\n", h.provenance.describe(), h.name);
    let _ = writeln!(
        out,
        "| backend | math dtype | instruction | peak TFLOP/s | efficiency | L2 -> smem efficiency |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for m in &h.math {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} |",
            m.backend,
            m.dtype,
            m.instruction,
            m.peak_tflops,
            m.efficiency,
            h.calibration.backends.get(m.backend).l2_efficiency
        );
    }
    let _ = writeln!(out, "\n{}.", a.note);
    for note in &a.notes {
        let _ = writeln!(out, "\nNote: {note}.");
    }
    if !a.constraints.is_empty() {
        let _ = writeln!(out, "\nConstraints: `{}`.", a.constraints.join("`, `"));
    }
    for b in &a.buckets {
        render_bucket(&mut out, b);
    }
    out
}

fn render_bucket(out: &mut String, b: &BucketAnalysis) {
    let w = &b.winner;
    let p = &w.prediction;
    let _ = writeln!(
        out,
        "\n## {} (planned for {})\n",
        bucket_text(&b.bucket),
        b.shape
    );
    let _ = writeln!(
        out,
        "**{}**: {:.1} us, {:.0} TFLOP/s, {}-bound.\n\n{}.\n",
        w.label, p.time_us, p.tflops, w.bound_by, w.why
    );
    for cost in &b.constraint_costs {
        let _ = writeln!(out, "Note: {}.\n", cost.message);
    }
    let m = &p.movement;
    let r = &p.registers;
    let s = &p.schedule;
    let _ = writeln!(out, "| layer | figures |");
    let _ = writeln!(out, "|---|---|");
    let _ = writeln!(
        out,
        "| data movement | DRAM {:.1} MB ({:.1} us at the sustained rate; L2 hit {:.0}%), L2->smem {:.1} MB ({:.1} us), smem {:.1} MB ({:.1} us){} |",
        m.dram_bytes / 1e6,
        m.dram_us,
        m.l2_hit_rate * 100.0,
        m.l2_to_smem_bytes / 1e6,
        m.l2_us,
        m.smem_bytes / 1e6,
        m.smem_us,
        if m.repack_dram_bytes > 0.0 {
            format!(", repack {:.1} MB ({:.1} us)", m.repack_dram_bytes / 1e6, m.repack_us)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "| registers | {} per thread = {} accumulators + {} fragments + {} addresses + {} epilogue; cap {}{}{} |",
        r.total,
        r.accumulators,
        r.fragments,
        r.addresses,
        r.epilogue,
        r.cap,
        if r.spills { " (spills)" } else { "" },
        match &b.ptxas {
            Some(c) => format!("; ptxas allocates {}", c.registers),
            None => String::new(),
        }
    );
    let _ = writeln!(
        out,
        "| scheduling | {} at {:.0} TFLOP/s peak x {:.2}; compute {:.1} us; {}; load latency {:.0} cycles needs {} stages (plan: {}) |",
        s.math.instruction,
        s.peak_tflops,
        s.math.efficiency,
        s.compute_us,
        occupancy_text(b),
        s.load_latency_cycles,
        s.stages_needed,
        w.plan.stages
    );
    let _ = writeln!(
        out,
        "| synchronization | {} {:?} per k-block x {} k-blocks at {:.0} cycles{}: {:.1} us exposed; epilogue {} |",
        p.sync.barriers_per_kblock,
        p.sync.kind,
        s.geometry.k_blocks,
        p.sync.barrier_cycles,
        fp8_cycles(&p.sync),
        p.sync.exposed_us,
        if p.sync.epilogue_hidden {
            "hidden under the other consumer's main loop (ping-pong)"
        } else if p.sync.epilogue_under_next_k_tile {
            "run under the next tile's first k-tile, exposed every wave (tile round) beyond it"
        } else {
            "exposed every wave (tile round)"
        }
    );
    let _ = writeln!(
        out,
        "\nTime: main loop {:.1} us + prologue/epilogue {:.1} + sync {:.1} + launch {:.1}{}.\n",
        p.breakdown.mainloop_us,
        p.breakdown.prologue_epilogue_us,
        p.breakdown.sync_us,
        p.breakdown.launch_us,
        if p.breakdown.repack_us > 0.0 {
            format!(" + repack {:.1}", p.breakdown.repack_us)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "Enumerated {} plans ({}); {} feasible.\n",
        b.enumerated,
        b.enumerated_by_backend
            .iter()
            // A backend with no plan space here (sm90 on an A100) is not worth a "0".
            .filter(|(_, n)| *n > 0)
            .map(|(be, n)| format!("{be} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        b.feasible
    );
    let pruning: Vec<_> = b.pruning.iter().filter(|p| p.violated > 0).collect();
    if !pruning.is_empty() {
        let _ = writeln!(out, "| rule | kind | violated by | removed |");
        let _ = writeln!(out, "|---|---|---|---|");
        for p in pruning {
            let _ = writeln!(
                out,
                "| `{}` | {:?} | {} | {} |",
                p.rule, p.kind, p.violated, p.removed
            );
        }
        out.push('\n');
    }
    render_rows(out, "Candidates", &b.candidates);
    if !b.model_only.is_empty() {
        render_rows(out, "Not generated yet (model only)", &b.model_only);
    }
}

/// The fp8 terms of the synchronization row: the promotion, and the K-block scales on top.
fn fp8_cycles(sync: &Sync) -> String {
    let mut text = String::new();
    if sync.promotion_cycles > 0.0 {
        let _ = write!(
            text,
            ", + {:.0} cycles per k-block for the fp8 promotion",
            sync.promotion_cycles
        );
    }
    if sync.kblock_scale_cycles > 0.0 {
        let _ = write!(
            text,
            ", + {:.0} cycles per k-block for the fp8 K-block scales",
            sync.kblock_scale_cycles
        );
    }
    text
}

/// Blocks per SM and waves: at ptxas's register count when the variant was compiled and that
/// count changes them (the model's figures are then only the estimate), else the model's.
fn occupancy_text(b: &BucketAnalysis) -> String {
    let s = &b.winner.prediction.schedule;
    let model = format!(
        "{} blocks/SM ({:?}); {:.2} waves",
        s.occupancy.blocks_per_sm, s.occupancy.limit, s.waves.waves
    );
    match &b.ptxas {
        Some(c) if c.blocks_per_sm != s.occupancy.blocks_per_sm => format!(
            "{} blocks/SM ({:?}); {:.2} waves at ptxas's {} registers (the model's {} gives {model})",
            c.blocks_per_sm, c.limit, c.waves, c.registers, c.model_registers
        ),
        _ => model,
    }
}

fn render_rows(out: &mut String, title: &str, rows: &[CandidateRow]) {
    let _ = writeln!(out, "{title}:\n");
    let _ = writeln!(
        out,
        "| # | plan | us | TFLOP/s | bottleneck | smem B | regs | blocks/SM | waves | trade-off |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.0} | {} | {} | {} | {} | {:.2} | {} |",
            r.rank,
            r.label,
            r.predicted_us,
            r.tflops,
            r.bottleneck,
            r.smem_bytes,
            r.registers,
            r.occupancy,
            r.waves,
            r.note
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::hw::preset;
    use crate::search::search;
    use crate::spec::*;

    fn spec() -> KernelSpec {
        let matrix = |name: &str, direction, dims: [ShapeSym; 2], layout, role| Operand {
            name: name.to_string(),
            direction,
            dtype: DType::Bf16,
            dims: dims.iter().map(|&s| Dim::Sym(s)).collect(),
            layout,
            role,
        };
        KernelSpec {
            name: "up".to_string(),
            target: TargetRef::Preset("h200".to_string()),
            hardware: preset("h200").unwrap(),
            operands: vec![
                matrix(
                    "A",
                    Direction::Input,
                    [ShapeSym::M, ShapeSym::K],
                    Layout::Row,
                    Role::A,
                ),
                matrix(
                    "B",
                    Direction::Input,
                    [ShapeSym::K, ShapeSym::N],
                    Layout::Col,
                    Role::B,
                ),
                matrix(
                    "D",
                    Direction::Output,
                    [ShapeSym::M, ShapeSym::N],
                    Layout::Row,
                    Role::D,
                ),
            ],
            params: vec![],
            accumulate: DType::F32,
            epilogue: Epilogue {
                output: "D".to_string(),
                expr: Expr::Acc,
            },
            shape: ShapeSpec {
                m: DimDomain::Set(vec![16, 4096]),
                n: DimDomain::Fixed(4096),
                k: DimDomain::Fixed(4096),
                fallback: crate::spec::ShapeFallback::None,
            },
            constraints: vec![Constraint {
                lhs: CExpr::Observable(Observable::Smem),
                op: ConstraintOp::Le,
                rhs: CExpr::Number(65536.0),
                text: "smem <= 64 KiB".to_string(),
            }],
            tiling: vec![],
        }
    }

    #[test]
    fn analysis_tells_the_winner_and_the_pruning() {
        let spec = spec();
        let result = search(&spec).unwrap();
        let analysis = Analysis::new(&spec, &result, 5);
        assert_eq!(analysis.buckets.len(), 2);
        let big = &analysis.buckets[1];
        assert_eq!(big.candidates.len(), 5);
        assert_eq!(big.candidates[0].label, big.winner.label);
        assert_eq!(big.candidates[0].note, "chosen");
        assert!(big.winner.why.contains(&big.winner.label));
        let smem = big
            .pruning
            .iter()
            .find(|p| p.rule == "smem <= 64 KiB")
            .unwrap();
        assert!(smem.removed > 0);
        assert!(
            analysis.note.contains("sm90 or sm80 or simt"),
            "{}",
            analysis.note
        );

        let md = render_markdown(&analysis);
        for needle in [
            "# up — analysis",
            "## Hardware assumptions (h200, sm_90a)",
            "| sm80 | bf16 | mma.sync.m16n8k16 |",
            "## M = 4096, N = 4096, K = 4096",
            "`smem <= 64 KiB`",
            "Figures: calibrated from measurements on this GPU (h200).",
            &format!("**{}**", big.winner.label),
        ] {
            assert!(md.contains(needle), "missing {needle:?} in\n{md}");
        }
    }

    /// ptxas's register count reaches the report, and where it changes the occupancy the
    /// scheduling figures are those of the compiled kernel.
    #[test]
    fn ptxas_registers_reach_the_report_and_its_occupancy() {
        let mut spec = spec();
        spec.hardware = preset("a100").unwrap();
        // Small tiles, so that registers rather than shared memory bound the occupancy.
        spec.constraints[0].rhs = CExpr::Number(16384.0);
        spec.constraints[0].text = "smem <= 16 KiB".to_string();
        let mut analysis = Analysis::new(&spec, &search(&spec).unwrap(), 3);
        let small = &analysis.buckets[0].winner;
        let (model_regs, model_blocks) = (
            small.prediction.registers.total,
            small.prediction.schedule.occupancy.blocks_per_sm,
        );
        analysis.record_ptxas(0, 255, &spec.hardware);
        analysis.record_ptxas(
            1,
            analysis.buckets[1].winner.prediction.registers.total,
            &spec.hardware,
        );
        let md = render_markdown(&analysis);
        let ptxas = analysis.buckets[0].ptxas.clone().unwrap();
        assert_eq!((ptxas.registers, ptxas.model_registers), (255, model_regs));
        assert!(
            ptxas.blocks_per_sm < model_blocks,
            "{ptxas:?} vs {model_blocks}"
        );
        assert_eq!(ptxas.limit, OccupancyLimit::Registers);
        assert!(md.contains("ptxas allocates 255"), "{md}");
        assert!(
            md.contains(&format!(
                "{} blocks/SM (Registers); {:.2} waves at ptxas's 255 registers (the model's \
                 {model_regs} gives {model_blocks} blocks/SM",
                ptxas.blocks_per_sm, ptxas.waves
            )),
            "{md}"
        );
        // The same count as the model's: the model's figures stand, said once.
        assert_eq!(md.matches("at ptxas's").count(), 1, "{md}");
        let json = serde_json::to_value(&analysis).unwrap();
        assert_eq!(json["buckets"][0]["ptxas"]["registers"], 255);
    }

    /// A target without sm90 (an A100) gets no note about sm90, generated or not; every backend
    /// being generated, none is called "not generated".
    #[test]
    fn the_backends_note_names_only_backends_of_the_target() {
        for (target, named) in [("a100", "sm80 or simt"), ("h200", "sm90 or sm80 or simt")] {
            let mut spec = spec();
            spec.hardware = preset(target).unwrap();
            let analysis = Analysis::new(&spec, &search(&spec).unwrap(), 3);
            let md = render_markdown(&analysis);
            assert!(analysis.note.contains(named), "{target}: {}", analysis.note);
            // Only the H200 preset is calibrated from measurements (its YAML says so).
            let figures = if target == "h200" {
                "calibrated from"
            } else {
                "datasheet figures"
            };
            assert!(
                md.contains(&format!("Figures: {figures}")),
                "{target}: {md}"
            );
            assert!(!md.contains("not generated"), "{target}: {md}");
            assert_eq!(md.contains("sm90"), target == "h200", "{target}: {md}");
        }
    }

    #[test]
    fn json_round_trips_with_stable_names() {
        let spec = spec();
        let analysis = Analysis::new(&spec, &search(&spec).unwrap(), 3);
        let json = serde_json::to_string_pretty(&analysis).unwrap();
        // serde_json parses floats to within the last bit; everything else comes back exactly.
        let back: Analysis = serde_json::from_str(&json).unwrap();
        assert_eq!(back.buckets.len(), analysis.buckets.len());
        for (b, a) in back.buckets.iter().zip(&analysis.buckets) {
            assert_eq!(b.winner.plan, a.winner.plan);
            assert_eq!(b.pruning, a.pruning);
            let (tb, ta) = (b.winner.prediction.time_us, a.winner.prediction.time_us);
            assert!((tb - ta).abs() <= 1e-12 * ta, "{tb} vs {ta}");
        }
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["schema_version"], SCHEMA_VERSION);
        let winner = &value["buckets"][0]["winner"];
        for field in ["label", "plan", "prediction", "bound_by", "layer", "why"] {
            assert!(!winner[field].is_null(), "winner.{field}");
        }
        assert!(winner["prediction"]["observables"]["tensor_util"].is_number());
    }
}
