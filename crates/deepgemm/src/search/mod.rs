//! The constrained search: spec -> legal plans per shape bucket, pruned and ranked.
//!
//! For each bucket of [`ShapeBucket::split`] the search plans for the bucket's largest shape:
//! it enumerates every backend's legal space (the plans a backend proposes that its `check`
//! accepts, [`crate::backend`]), predicts each plan with the model,
//! removes plans outside the `tiling` domains, plans the hardware cannot hold (shared memory or
//! registers per SM, register spills) and plans that break a hard constraint — counting what
//! each one removed — and ranks the rest by predicted time, with soft constraints (`~`) as
//! penalties. Ties are broken by [`tie_break`], last by the plan label, so the ranking is
//! deterministic.
//!
//! Backends without a generator yet are enumerated and predicted like the others, so the report
//! can say what they would give, but only plans of [`generated_backends`] are returned.

pub mod constraints;
pub mod paths;

use crate::backend::{self, generated_backends};
use crate::codegen;
use crate::model::{self, Prediction, Problem};
use crate::plan::{Backend, Plan, Shape, ShapeBucket, Variant};
use crate::spec::{ConstraintOp, KernelSpec};
use constraints::{fmt_value, Env, Standing, Value};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How much a soft constraint weighs against time: a plan a whole target away from a `~` target
/// (relative distance 1) ranks like a plan this much slower (0.25 = 25%).
pub const SOFT_PENALTY_PER_DISTANCE: f64 = 0.25;

/// Ranked candidates kept per bucket (the report shows the top N of these).
pub const KEPT_CANDIDATES: usize = 32;

/// A plan with its prediction and ranking score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub label: String,
    pub plan: Plan,
    pub prediction: Prediction,
    /// Sum of the soft constraints' relative distances.
    pub soft_distance: f64,
    /// What ranking sorts by: predicted time x (1 + penalty), microseconds, to 10 ns (see
    /// [`tie_resolution`]).
    pub score_us: f64,
}

/// A score to 10 ns: two plans whose predictions differ by less are ties, which the tie-breaks
/// decide, not the last digits of the model's sums (2047x1023x4095: 64x256 ping-pong 51.316 us
/// and 128x128 cooperative 51.320, measured 54.3 and 49.8).
fn tie_resolution(score_us: f64) -> f64 {
    (score_us * 100.0).round() / 100.0
}

/// Why plans were removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneKind {
    /// A `tiling` domain of the spec.
    Tiling,
    /// A limit of the hardware (a block must fit an SM, registers must not spill).
    Hardware,
    /// A hard constraint of the spec.
    Constraint,
}

/// What one rule removed from one bucket's space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneCount {
    /// The rule as text, e.g. `registers <= 96`.
    pub rule: String,
    pub kind: PruneKind,
    /// Plans that break this rule (a plan breaking several counts for each).
    pub violated: usize,
    /// Plans removed by this rule first, in the order tiling, hardware, constraints as declared:
    /// these add up to all removed plans.
    pub removed: usize,
}

/// The search's outcome for one shape bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketResult {
    pub bucket: ShapeBucket,
    /// The shape planned for (the bucket's largest).
    pub shape: Shape,
    /// Plans enumerated, over all backends, and per backend.
    pub enumerated: usize,
    pub enumerated_by_backend: Vec<(Backend, usize)>,
    pub pruned: Vec<PruneCount>,
    /// Plans of generated backends that met every rule.
    pub feasible: usize,
    /// The best `KEPT_CANDIDATES` feasible plans, best first; `candidates[0]` is the winner.
    pub candidates: Vec<Candidate>,
    /// The best feasible plans of backends without a generator yet, best first (model only).
    pub model_only: Vec<Candidate>,
    /// The best feasible plan of each generated backend that has one, best first: what the
    /// winner's backend was chosen over.
    pub best_by_backend: Vec<BackendBest>,
    /// Hard constraints that make the winner slower than the best plan they remove.
    pub constraint_costs: Vec<ConstraintCost>,
}

/// What one hard constraint costs: the predicted time of the best generated plan without it (every
/// other rule still met) against the winner's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstraintCost {
    pub constraint: String,
    /// The best plan the constraint removes, and its predicted time.
    pub without_plan: String,
    pub without_us: f64,
    /// The winner's predicted time.
    pub with_us: f64,
    pub message: String,
}

/// A constraint that slows the winner by less than this fraction is not reported: the model
/// cannot tell such plans apart.
const CONSTRAINT_COST_REPORTED: f64 = 0.01;

/// The fastest feasible plan of one backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendBest {
    pub backend: Backend,
    pub label: String,
    pub predicted_us: f64,
}

impl BucketResult {
    pub fn winner(&self) -> &Candidate {
        &self.candidates[0]
    }
}

/// Everything the search decided for a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub kernel: String,
    pub buckets: Vec<BucketResult>,
}

impl SearchResult {
    /// One variant per bucket, named for file names and the dispatch table (`v0_m1-16`), with
    /// the bucket's winning plan.
    pub fn variants(&self) -> Vec<Variant> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| Variant {
                name: variant_name(i, &b.bucket),
                bucket: b.bucket,
                plan: b.winner().plan.clone(),
            })
            .collect()
    }

    /// The bucket that serves `shape`, if the spec declares it.
    pub fn bucket_for(&self, shape: Shape) -> Option<(usize, &BucketResult)> {
        self.buckets
            .iter()
            .enumerate()
            .find(|(_, b)| b.bucket.contains(shape.m, shape.n, shape.k))
    }
}

/// `v{index}` plus each dimension that varies across the bucket, e.g. `v3_m129-256`.
pub fn variant_name(index: usize, bucket: &ShapeBucket) -> String {
    let mut name = format!("v{index}");
    for (dim, (lo, hi)) in [("m", bucket.m), ("n", bucket.n), ("k", bucket.k)] {
        if lo != hi {
            name.push_str(&format!("_{dim}{lo}-{hi}"));
        } else if dim == "m" {
            name.push_str(&format!("_m{lo}"));
        }
    }
    name
}

/// The least change to one constraint that would admit a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relaxation {
    pub constraint: String,
    /// The side's value for the plan that comes closest, e.g. 168 for `registers <= 96`.
    pub needed: String,
    /// That plan's label.
    pub plan: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SearchError {
    #[error("constraint {text}: {why}")]
    InvalidConstraint { text: String, why: String },
    #[error("constraints `{first}` and `{second}` contradict each other: {why}")]
    Contradictory {
        first: String,
        second: String,
        why: String,
    },
    #[error(
        "no generated backend ({backends}) can compute this {dtype} kernel on {hardware}: {reason}"
    )]
    NoBackend {
        dtype: String,
        hardware: String,
        backends: String,
        /// The first reason a generator gave, e.g. the epilogue it cannot express.
        reason: String,
    },
    #[error("{message}")]
    Infeasible {
        bucket: ShapeBucket,
        relaxations: Vec<Relaxation>,
        message: String,
    },
}

/// Plan every shape bucket of `spec`.
pub fn search(spec: &KernelSpec) -> Result<SearchResult, SearchError> {
    for c in &spec.constraints {
        constraints::check_constraint(c).map_err(|why| SearchError::InvalidConstraint {
            text: c.text.clone(),
            why,
        })?;
    }
    for d in &spec.tiling {
        if let Some(cond) = &d.condition {
            constraints::check_condition(cond).map_err(|why| SearchError::InvalidConstraint {
                text: d.to_string(),
                why,
            })?;
        }
    }
    if let Some((first, second, why)) = constraints::find_contradiction(&spec.constraints) {
        return Err(SearchError::Contradictory { first, second, why });
    }
    // A generated backend offers only what its generator renders for this spec, so the search
    // never returns a plan that `compile` would then refuse.
    let generated = generated_backends();
    let mut rejection: Option<String> = None;
    let spaces: Vec<(Backend, Vec<Plan>)> = Backend::ALL
        .into_iter()
        .map(|b| {
            let mut plans = backend::proposals(spec, b);
            if generated.contains(&b) {
                plans.retain(|plan| match codegen::check_supported(spec, plan) {
                    Ok(()) => true,
                    Err(e) => {
                        rejection.get_or_insert_with(|| e.to_string());
                        false
                    }
                });
            }
            (b, plans)
        })
        .collect();
    let generated_plans: usize = spaces
        .iter()
        .filter(|(b, _)| generated.contains(b))
        .map(|(_, p)| p.len())
        .sum();
    if generated_plans == 0 {
        return Err(SearchError::NoBackend {
            dtype: spec.a().dtype.to_string(),
            hardware: spec.hardware.name.clone(),
            backends: backend_names(&generated),
            reason: rejection.unwrap_or_else(|| "the hardware lacks their instructions".into()),
        });
    }
    let buckets = ShapeBucket::split(&spec.shape)
        .into_iter()
        .map(|bucket| search_bucket(spec, &spaces, bucket))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SearchResult {
        kernel: spec.name.clone(),
        buckets,
    })
}

/// A plan that broke only one hard constraint, kept to say how far that constraint must move.
struct NearMiss {
    standing: Standing,
    label: String,
    /// How far outside the constraint the plan is (smaller is closer).
    excess: f64,
}

fn search_bucket(
    spec: &KernelSpec,
    spaces: &[(Backend, Vec<Plan>)],
    bucket: ShapeBucket,
) -> Result<BucketResult, SearchError> {
    let hw = &spec.hardware;
    let shape = bucket.largest();
    let problem = Problem::new(spec, shape);
    let hard: Vec<_> = spec
        .constraints
        .iter()
        .filter(|c| c.op != ConstraintOp::Near)
        .collect();
    let soft: Vec<_> = spec
        .constraints
        .iter()
        .filter(|c| c.op == ConstraintOp::Near)
        .collect();

    let mut pruned: Vec<PruneCount> = spec
        .tiling
        .iter()
        .map(|d| prune_rule(d.to_string(), PruneKind::Tiling))
        .collect();
    let fits_rule = pruned.len();
    pruned.push(prune_rule(
        format!(
            "a block fits one SM ({} B smem, {} registers)",
            hw.smem_per_sm_bytes, hw.regs_per_sm
        ),
        PruneKind::Hardware,
    ));
    let grid_rule = pruned.len();
    pruned.push(prune_rule(
        format!("the grid fits {} blocks (grid.x)", codegen::MAX_GRID_BLOCKS),
        PruneKind::Hardware,
    ));
    let spill_rule = pruned.len();
    pruned.push(prune_rule(
        "registers fit without spilling".to_string(),
        PruneKind::Hardware,
    ));
    let first_constraint = pruned.len();
    pruned.extend(
        hard.iter()
            .map(|c| prune_rule(c.text.clone(), PruneKind::Constraint)),
    );

    let mut enumerated = 0;
    let mut enumerated_by_backend = Vec::new();
    let mut feasible: Vec<Candidate> = Vec::new();
    let mut model_only: Vec<Candidate> = Vec::new();
    let mut near_misses: Vec<Option<NearMiss>> = hard.iter().map(|_| None).collect();
    let tensor_core_metric: Vec<bool> = hard.iter().map(|c| reads_tensor_cores(c)).collect();
    // Per hard constraint: the fastest generated plan that breaks only it.
    let mut best_without: Vec<Option<(f64, String)>> = hard.iter().map(|_| None).collect();
    let mut violations: Vec<usize> = Vec::with_capacity(hard.len());
    let generated_backends = generated_backends();
    for (backend, plans) in spaces {
        enumerated += plans.len();
        enumerated_by_backend.push((*backend, plans.len()));
        let generated = generated_backends.contains(backend);
        for plan in plans {
            // Rules in order: the first broken one is charged with the removal.
            let mut removed_by: Option<usize> = None;
            for (i, d) in spec.tiling.iter().enumerate() {
                if !constraints::in_domain(d, plan) {
                    charge(&mut pruned, &mut removed_by, i);
                }
            }
            let prediction = model::predict_problem(&problem, plan, hw);
            if prediction.schedule.occupancy.blocks_per_sm == 0 {
                charge(&mut pruned, &mut removed_by, fits_rule);
            }
            if prediction.schedule.geometry.blocks > codegen::MAX_GRID_BLOCKS {
                charge(&mut pruned, &mut removed_by, grid_rule);
            }
            if prediction.registers.spills {
                charge(&mut pruned, &mut removed_by, spill_rule);
            }
            let env = Env {
                plan,
                observables: Some(&prediction.observables),
            };
            let structural_ok = removed_by.is_none();
            violations.clear();
            let mut standings = Vec::with_capacity(hard.len());
            for (i, c) in hard.iter().enumerate() {
                let standing = constraints::stand(c, env);
                if standing.is_none_or(|s| !s.holds) {
                    charge(&mut pruned, &mut removed_by, first_constraint + i);
                    violations.push(i);
                }
                standings.push(standing);
            }
            if generated && structural_ok && violations.len() == 1 {
                let i = violations[0];
                // A CUDA-core plan's "tensor_util" is its FFMA utilization: citing it as the
                // closest to a tensor-core target would point the user at the wrong kind.
                let right_kind =
                    !tensor_core_metric[i] || plan.backend.uses_tensor_cores(spec.a().dtype);
                if let (Some(s), true) = (standings[i], right_kind) {
                    record_near_miss(&mut near_misses[i], hard[i].op, s, plan);
                }
                let time = prediction.time_us;
                if best_without[i].as_ref().is_none_or(|(t, _)| time < *t) {
                    best_without[i] = Some((time, plan.label()));
                }
            }
            if removed_by.is_some() {
                continue;
            }
            let soft_distance: f64 = soft
                .iter()
                .filter_map(|c| constraints::stand(c, env))
                .map(|s| s.distance)
                .sum();
            let candidate = Candidate {
                label: plan.label(),
                plan: plan.clone(),
                score_us: tie_resolution(
                    prediction.time_us * (1.0 + SOFT_PENALTY_PER_DISTANCE * soft_distance),
                ),
                soft_distance,
                prediction,
            };
            if generated {
                feasible.push(candidate);
            } else {
                model_only.push(candidate);
            }
        }
    }

    if feasible.is_empty() {
        return Err(infeasible(bucket, &pruned, &hard, near_misses, spec));
    }
    let feasible_count = feasible.len();
    rank(&mut feasible);
    rank(&mut model_only);
    let with_us = feasible[0].prediction.time_us;
    let constraint_costs = hard
        .iter()
        .zip(best_without)
        .filter_map(|(c, best)| {
            let (without_us, without_plan) = best?;
            (without_us < with_us * (1.0 - CONSTRAINT_COST_REPORTED)).then(|| ConstraintCost {
                message: format!(
                    "`{}` costs {:.1} us: without it: {without_us:.1} us ({without_plan}); \
                     with it: {with_us:.1} us",
                    c.text,
                    with_us - without_us
                ),
                constraint: c.text.clone(),
                without_plan,
                without_us,
                with_us,
            })
        })
        .collect();
    let mut best_by_backend: Vec<BackendBest> = Vec::new();
    for c in &feasible {
        if !best_by_backend.iter().any(|b| b.backend == c.plan.backend) {
            best_by_backend.push(BackendBest {
                backend: c.plan.backend,
                label: c.label.clone(),
                predicted_us: c.prediction.time_us,
            });
        }
    }
    feasible.truncate(KEPT_CANDIDATES);
    model_only.truncate(KEPT_CANDIDATES);
    Ok(BucketResult {
        bucket,
        shape,
        enumerated,
        enumerated_by_backend,
        pruned,
        feasible: feasible_count,
        candidates: feasible,
        model_only,
        best_by_backend,
        constraint_costs,
    })
}

/// Counts a broken rule; the first one a plan breaks is charged with removing it.
fn charge(pruned: &mut [PruneCount], removed_by: &mut Option<usize>, rule: usize) {
    pruned[rule].violated += 1;
    if removed_by.is_none() {
        *removed_by = Some(rule);
        pruned[rule].removed += 1;
    }
}

fn prune_rule(rule: String, kind: PruneKind) -> PruneCount {
    PruneCount {
        rule,
        kind,
        violated: 0,
        removed: 0,
    }
}

/// Best first: by score, then by the tie-breaks of [`tie_break`].
pub fn rank(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        a.score_us
            .total_cmp(&b.score_us)
            .then_with(|| tie_break(a, b).0)
    });
}

/// What decides between two plans the model predicts equally fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// A ping-pong plan whose blocks get at most one tile each (one wave or less) leaves its
    /// second consumer idle and hides no epilogue under it: it loses to a plan without that. At
    /// equal predictions, measured: 2047x1023x4095 128x128 cooperative 47.3-49.8 us against
    /// ping-pong 50.8-54.3; 64x2112x7168 and 128x2112x7168 4% and 6% faster on one consumer
    /// without ping-pong (bench/RESULTS.md, 2026-12-06).
    IdleConsumer,
    /// A plan whose epilogue warps wait for the copy engine to read each TMA-stored piece before
    /// staging the next (one buffer a warp) loses to one whose warps do not: the model does not
    /// price that wait, so a plan gives up its second buffer for a stage only where the model
    /// sees the stage pay. Before the latency slack: two buffers fit beside three stages of
    /// almost every tile, so this rarely overrules it.
    StoreWait,
    /// More pipeline stages beyond those the load latency needs: on the H200 a 2-stage plan the
    /// model calls latency-hidden measured 10% slower than its 3-stage twin (bench/RESULTS.md).
    LatencySlack,
    /// Fewer DRAM bytes (the raster order and tile shape that reuse more of L2): compute-bound
    /// twins measured up to 12% apart at 8192^3-16384^3, the less DRAM traffic the faster.
    DramBytes,
    /// Of two tensor-core plans that differ only in their raster order, the grouped one. Where
    /// the model sees no DRAM difference (the operands stay in L2) it has no term for the order,
    /// yet in the saved tune records (bench/results, H100 and H200) the grouped twin ran faster
    /// in 146 of 227 sm90 pairs (mean -0.61%) and 187 of 304 sm80 pairs (-0.89%): sm90 bf16
    /// 2047x1023x4095 -1.6% (19 of 20 pairs), 4096x7168x2048 -2.8% (10 of 10), 4096^3 -1.1% (10
    /// of 10), 8192^3 -1.7% (8 of 10). Not everywhere: 4095x4097x4093 +1.1% (its grouped plans
    /// already win on DRAM bytes), fp8 4096x7168x2048 +1.4%; simt, 2 of 8 (+0.5%), keeps label
    /// order (bench/RESULTS.md, 2026-12-07).
    GroupedRaster,
    /// Label order: nothing the model sees tells them apart (labels are unique in a bucket).
    Label,
}

/// Pipeline stages a plan has beyond those its load latency needs (negative: too few).
pub fn latency_slack(c: &Candidate) -> i64 {
    c.plan.stages as i64 - c.prediction.schedule.stages_needed as i64
}

/// Whether grouping tile rows changes the walk of a tensor-core plan (where the twins were
/// measured): only with several rows of tiles (of clusters, whose blocks take vertically
/// adjacent tiles) and several columns.
fn raster_reorders(c: &Candidate) -> bool {
    let (shape, plan) = (c.prediction.shape, &c.plan);
    if !matches!(plan.backend, Backend::Sm90 | Backend::Sm80) {
        return false;
    }
    let tiles_m = shape.m.div_ceil(plan.tile.m.max(1) as u64);
    let rows = tiles_m.div_ceil(plan.cluster_m.max(1) as u64);
    rows > 1 && shape.n.div_ceil(plan.tile.n.max(1) as u64) > 1
}

/// The order of `a` and `b` by the first tie-break that tells them apart, and which one it was.
pub fn tie_break(a: &Candidate, b: &Candidate) -> (std::cmp::Ordering, TieBreak) {
    // Whole KiB: rounding noise between two ways of counting the same bytes must not decide.
    let dram_kib = |c: &Candidate| (c.prediction.movement.dram_bytes / 1024.0).round() as i64;
    let idle_consumer =
        |c: &Candidate| c.plan.threads.pingpong() && c.prediction.schedule.waves.waves <= 1.0;
    let by_idle = idle_consumer(a).cmp(&idle_consumer(b));
    if by_idle.is_ne() {
        return (by_idle, TieBreak::IdleConsumer);
    }
    let waits = |c: &Candidate| c.plan.smem.epilogue_waits_for_stores();
    let by_wait = waits(a).cmp(&waits(b));
    if by_wait.is_ne() {
        return (by_wait, TieBreak::StoreWait);
    }
    let by_slack = latency_slack(b).cmp(&latency_slack(a));
    if by_slack.is_ne() {
        return (by_slack, TieBreak::LatencySlack);
    }
    let by_dram = dram_kib(a).cmp(&dram_kib(b));
    if by_dram.is_ne() {
        return (by_dram, TieBreak::DramBytes);
    }
    // Label order, but by the plain-raster twin's label so that twins sit side by side (each
    // key is the candidate's own, which keeps the order total), the grouped one first where its
    // order differs from the plain one.
    let by_twin_label = a
        .plan
        .label_in_plain_raster()
        .cmp(&b.plan.label_in_plain_raster());
    if by_twin_label.is_ne() {
        return (by_twin_label, TieBreak::Label);
    }
    let grouped = |c: &Candidate| c.plan.raster.group_m > 1 && raster_reorders(c);
    let by_raster = grouped(b).cmp(&grouped(a));
    if by_raster.is_ne() {
        return (by_raster, TieBreak::GroupedRaster);
    }
    (a.label.cmp(&b.label), TieBreak::Label)
}

/// Keeps the plan that breaks the constraint by the least.
fn record_near_miss(slot: &mut Option<NearMiss>, op: ConstraintOp, s: Standing, plan: &Plan) {
    let excess = match (op, s.lhs, s.rhs) {
        (ConstraintOp::Le, Value::Number(l), Value::Number(r)) => l - r,
        (ConstraintOp::Ge, Value::Number(l), Value::Number(r)) => r - l,
        (ConstraintOp::Eq, Value::Number(l), Value::Number(r)) => (l - r).abs(),
        // A backend mismatch: every miss is as far.
        _ => 1.0,
    };
    let closer = slot
        .as_ref()
        .is_none_or(|m| excess < m.excess || (excess == m.excess && plan.label() < m.label));
    if closer {
        *slot = Some(NearMiss {
            standing: s,
            label: plan.label(),
            excess,
        });
    }
}

fn infeasible(
    bucket: ShapeBucket,
    pruned: &[PruneCount],
    hard: &[&crate::spec::Constraint],
    near_misses: Vec<Option<NearMiss>>,
    spec: &KernelSpec,
) -> SearchError {
    let where_ = bucket_text(&bucket);
    // A tensor-core constraint that no tensor-core plan can approach: say that, rather than
    // nothing (its CUDA-core near misses are not recorded).
    let tensor_core_plans = paths::backend_statuses(spec)
        .iter()
        .any(|b| b.generated && b.refusal.is_none() && b.backend.uses_tensor_cores(spec.a().dtype));
    let no_tensor_core_plan: Vec<String> = hard
        .iter()
        .zip(&near_misses)
        .filter(|(c, miss)| miss.is_none() && reads_tensor_cores(c) && !tensor_core_plans)
        .map(|(c, _)| {
            format!(
                "`{}` is about tensor cores, and no tensor-core plan runs these {} inputs on {}",
                c.text,
                spec.a().dtype,
                spec.hardware.name
            )
        })
        .collect();
    let relaxations: Vec<Relaxation> = hard
        .iter()
        .zip(near_misses)
        .filter_map(|(c, miss)| {
            let miss = miss?;
            // Name the plan's side of the constraint, whichever side it was written on.
            let (needed, op) = if constant_on_left(c) {
                (fmt_value(miss.standing.rhs), flipped(c.op))
            } else {
                (fmt_value(miss.standing.lhs), c.op)
            };
            let verb = match op {
                ConstraintOp::Le => "the smallest needs",
                ConstraintOp::Ge => "the largest reaches",
                _ => "the nearest has",
            };
            let message = format!(
                "`{}` admits no plan; {verb} {needed} ({})",
                c.text, miss.label
            );
            Some(Relaxation {
                constraint: c.text.clone(),
                needed,
                plan: miss.label,
                message,
            })
        })
        .collect();
    let counts = pruned
        .iter()
        .filter(|p| p.violated > 0)
        .map(|p| format!("`{}` removed {} of them", p.rule, p.violated))
        .collect::<Vec<_>>()
        .join(", ");
    let message = if !no_tensor_core_plan.is_empty() {
        format!(
            "no plan meets every constraint for {where_}: {}",
            no_tensor_core_plan.join("; ")
        )
    } else if relaxations.is_empty() {
        format!(
            "no plan of a generated backend ({}) meets every rule for {where_}; no single constraint's relaxation admits one ({counts})",
            backend_names(&generated_backends())
        )
    } else {
        let lines: Vec<_> = relaxations.iter().map(|r| r.message.as_str()).collect();
        format!(
            "no plan meets every constraint for {where_}: {}",
            lines.join("; ")
        )
    };
    SearchError::Infeasible {
        bucket,
        relaxations,
        message,
    }
}

/// `sm90, sm80, simt` for messages.
fn backend_names(backends: &[Backend]) -> String {
    backends
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a constraint reads an observable only tensor-core plans have in the sense the user
/// means (`tensor_util`, `use_tensor_cores`).
fn reads_tensor_cores(c: &crate::spec::Constraint) -> bool {
    use crate::spec::{CExpr, Observable};
    fn reads(e: &CExpr) -> bool {
        match e {
            CExpr::Observable(o) => {
                matches!(o, Observable::TensorUtil | Observable::UseTensorCores)
            }
            CExpr::Neg(x) | CExpr::Not(x) => reads(x),
            CExpr::Bin(_, l, r) => reads(l) || reads(r),
            CExpr::Number(_) | CExpr::TileVar(_) | CExpr::Backend(_) => false,
        }
    }
    reads(&c.lhs) || reads(&c.rhs)
}

/// Whether the constant is on the left, as in `96 >= registers`.
fn constant_on_left(c: &crate::spec::Constraint) -> bool {
    constraints::constant(&c.lhs).is_some() && constraints::constant(&c.rhs).is_none()
}

fn flipped(op: ConstraintOp) -> ConstraintOp {
    match op {
        ConstraintOp::Le => ConstraintOp::Ge,
        ConstraintOp::Ge => ConstraintOp::Le,
        other => other,
    }
}

/// `M in 1..=16, N = 4096, K = 7168` for messages.
pub fn bucket_text(b: &ShapeBucket) -> String {
    let dim = |name: &str, (lo, hi): (u64, u64)| {
        if lo == hi {
            format!("{name} = {lo}")
        } else {
            format!("{name} in {lo}..={hi}")
        }
    };
    format!("{}, {}, {}", dim("M", b.m), dim("N", b.n), dim("K", b.k))
}
