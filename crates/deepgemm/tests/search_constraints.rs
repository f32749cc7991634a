//! The search: pruning, ranking, and the messages for specs it cannot satisfy.

mod search_support;

use deepgemm::dtype::DType;
use deepgemm::model::ObservableValue;
use deepgemm::plan::Backend;
use deepgemm::search::{search, tie_break, SearchError, TieBreak};
use deepgemm::spec::{
    CExpr, Constraint, ConstraintOp, DimDomain, Observable, Role, TileValues, TileVar, TilingDomain,
};
use proptest::prelude::*;
use search_support::*;
use std::cmp::Ordering;

fn observable_value(c: &deepgemm::search::Candidate, o: Observable) -> f64 {
    match c.prediction.observables.get(o) {
        ObservableValue::Number(x) => x,
        ObservableValue::Backend(_) => panic!("{o:?} is numeric"),
    }
}

#[test]
fn a_shape_range_is_planned_bucket_by_bucket() {
    let spec = gemm(
        DType::Bf16,
        DimDomain::Range { lo: 1, hi: 8192 },
        14336,
        4096,
    );
    let result = search(&spec).unwrap();
    assert_eq!(result.buckets.len(), 10);
    for b in &result.buckets {
        assert_eq!(b.shape.m, b.bucket.m.1);
        assert!(b.feasible > 0 && !b.candidates.is_empty());
        // Every backend is generated: nothing is left model-only.
        assert!(b.model_only.is_empty());
        let removed: usize = b.pruned.iter().map(|p| p.removed).sum();
        assert!(removed + b.feasible <= b.enumerated);
        assert!(b.pruned.iter().all(|p| p.violated >= p.removed));
    }
    // wgmma wins where M fills its tiles on Hopper.
    let largest = result.buckets.last().unwrap();
    assert_eq!(largest.winner().plan.backend, Backend::Sm90);
    let times: Vec<f64> = result
        .buckets
        .iter()
        .map(|b| b.winner().prediction.time_us)
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn hard_constraints_prune_and_are_counted() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![
        constraint(Observable::Smem, ConstraintOp::Le, 64.0 * 1024.0),
        constraint(Observable::Registers, ConstraintOp::Le, 128.0),
    ];
    let result = search(&spec).unwrap();
    let b = &result.buckets[0];
    for c in &b.candidates {
        assert!(observable_value(c, Observable::Smem) <= 65536.0);
        assert!(observable_value(c, Observable::Registers) <= 128.0);
    }
    let smem = b.pruned.iter().find(|p| p.rule == "smem <= 65536").unwrap();
    let regs = b
        .pruned
        .iter()
        .find(|p| p.rule == "registers <= 128")
        .unwrap();
    assert!(smem.violated > 0 && regs.violated > 0);
}

#[test]
fn tiling_domains_narrow_the_space() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.tiling = vec![TilingDomain {
        var: TileVar::TILE_N,
        values: TileValues::Set(vec![64]),
        condition: None,
    }];
    let result = search(&spec).unwrap();
    let b = &result.buckets[0];
    assert!(b.candidates.iter().all(|c| c.plan.tile.n == 64));
    assert_eq!(b.pruned[0].rule, "TILE_N in {64}");
    assert!(b.pruned[0].removed > 0);
}

#[test]
fn soft_constraints_trade_against_time() {
    // At 1024^3 smaller tiles are close behind the fastest plan: `registers ~ 64` pulls the pick
    // to one of them at some cost in time.
    let mut spec = fixed(DType::Bf16, 1024, 1024, 1024);
    let fastest = search(&spec).unwrap().buckets[0].winner().clone();
    spec.constraints = vec![constraint(Observable::Registers, ConstraintOp::Near, 64.0)];
    let soft = search(&spec).unwrap().buckets[0].winner().clone();
    assert!(soft.prediction.registers.total < fastest.prediction.registers.total);
    assert!(soft.prediction.time_us >= fastest.prediction.time_us);
}

#[test]
fn infeasible_spec_names_the_least_relaxation() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![constraint(Observable::Registers, ConstraintOp::Le, 30.0)];
    let message = match search(&spec) {
        Err(e @ SearchError::Infeasible { .. }) => e.to_string(),
        other => panic!("expected infeasible, got {other:?}"),
    };
    // The smallest plan: a 128x8 sm90 tile over two consumer warpgroups, 4 accumulators + the
    // consumers' addresses (fewer than a SIMT thread's: 1 accumulator + 2 fragments + 40) +
    // epilogue temporaries.
    let cal = &spec.hardware.calibration;
    let sm90_addresses = cal.backends.get(Backend::Sm90).address_regs.unwrap();
    let smallest = 4 + sm90_addresses + cal.epilogue_regs_per_thread;
    assert!(
        message.contains(&format!(
            "`registers <= 30` admits no plan; the smallest needs {smallest} (sm90 128x8x64"
        )),
        "{message}"
    );
}

/// A tensor-core metric is never answered with a CUDA-core plan: the closest plan cited runs on
/// tensor cores, and where none can run the inputs, the message says that instead.
#[test]
fn a_tensor_core_metric_cites_a_tensor_core_plan() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![constraint(Observable::TensorUtil, ConstraintOp::Ge, 0.99)];
    let Err(SearchError::Infeasible { relaxations, .. }) = search(&spec) else {
        panic!("tensor_util >= 0.99 is out of reach")
    };
    assert!(!relaxations[0].plan.starts_with("simt"), "{relaxations:?}");
    let mut spec = fixed(DType::E4m3, 4096, 4096, 4096);
    // A bf16 D, on Ada: no generator has fp8 tensor-core plans there (sm80's mma.sync takes
    // 16-bit and tf32 inputs, and there is no wgmma), so fp8 runs only on the CUDA-core fallback.
    spec.hardware = deepgemm::hw::preset("l40s").unwrap();
    for op in spec.operands.iter_mut() {
        if op.role == Role::D {
            op.dtype = DType::Bf16;
        }
    }
    spec.constraints = vec![constraint(Observable::TensorUtil, ConstraintOp::Ge, 0.9)];
    let err = search(&spec).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("no tensor-core plan runs these e4m3 inputs"),
        "{message}"
    );
    assert!(!message.contains("(simt"), "{message}");
}

#[test]
fn two_binding_constraints_are_both_reported() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![
        constraint(Observable::Tflops, ConstraintOp::Ge, 2000.0),
        // Not smem: tiny plans have none.
        constraint(Observable::Registers, ConstraintOp::Le, 16.0),
    ];
    let err = search(&spec).unwrap_err();
    let SearchError::Infeasible { .. } = &err else {
        panic!("{err:?}")
    };
    let message = err.to_string();
    assert!(
        message.contains("tflops >= 2000") && message.contains("registers <= 16"),
        "{message}"
    );
}

#[test]
fn contradictory_constraints_are_named() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![
        constraint(Observable::Smem, ConstraintOp::Le, 10240.0),
        constraint(Observable::Smem, ConstraintOp::Ge, 20480.0),
    ];
    let message = search(&spec).unwrap_err().to_string();
    assert_eq!(
        message,
        "constraints `smem <= 10240` and `smem >= 20480` contradict each other: `smem` would have to be <= 10240 and >= 20480 at once"
    );

    spec.constraints = vec![
        tile_constraint(TileVar::TILE_M, ConstraintOp::Eq, 64.0),
        tile_constraint(TileVar::TILE_M, ConstraintOp::Eq, 128.0),
    ];
    let message = search(&spec).unwrap_err().to_string();
    assert!(
        message.contains("`TILE_M == 64` and `TILE_M == 128` contradict"),
        "{message}"
    );
    assert!(message.contains("= 64 and = 128"), "{message}");
}

#[test]
fn ill_typed_constraints_are_errors() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![Constraint {
        lhs: CExpr::Observable(Observable::Backend),
        op: ConstraintOp::Le,
        rhs: CExpr::Number(3.0),
        text: "backend <= 3".to_string(),
    }];
    let err = search(&spec).unwrap_err();
    assert!(matches!(err, SearchError::InvalidConstraint { .. }));
    assert!(
        err.to_string()
            .contains("`backend <= 3` compares a backend with a number"),
        "{err}"
    );
}

#[test]
fn backend_constraints_select_backends() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    spec.constraints = vec![Constraint {
        lhs: CExpr::Observable(Observable::Backend),
        op: ConstraintOp::Eq,
        rhs: CExpr::Backend(Backend::Simt),
        text: "backend == simt".to_string(),
    }];
    let result = search(&spec).unwrap();
    assert!(result.buckets[0]
        .candidates
        .iter()
        .all(|c| c.plan.backend == Backend::Simt));
}

#[test]
fn ranking_is_deterministic_and_ordered() {
    let spec = gemm(
        DType::Bf16,
        DimDomain::Set(vec![64, 1000, 4096]),
        4096,
        7168,
    );
    let first = search(&spec).unwrap();
    let second = search(&spec).unwrap();
    assert_eq!(first, second);
    for b in &first.buckets {
        for w in b.candidates.windows(2) {
            let slack = |c: &deepgemm::search::Candidate| {
                c.plan.stages as i64 - c.prediction.schedule.stages_needed as i64
            };
            let waits = |c: &deepgemm::search::Candidate| c.plan.smem.epilogue_waits_for_stores();
            let idle = |c: &deepgemm::search::Candidate| {
                c.plan.threads.pingpong() && c.prediction.schedule.waves.waves <= 1.0
            };
            let dram = |c: &deepgemm::search::Candidate| {
                (c.prediction.movement.dram_bytes / 1024.0).round() as i64
            };
            let (tie, why) = tie_break(&w[0], &w[1]);
            let order = w[0].score_us.total_cmp(&w[1].score_us).then(tie);
            assert_eq!(order, Ordering::Less, "{} then {}", w[0].label, w[1].label);
            // Scores are whole 10 ns.
            assert_eq!(w[0].score_us, (w[0].score_us * 100.0).round() / 100.0);
            if w[0].score_us == w[1].score_us {
                // Each tie-break means what it says.
                if why != TieBreak::IdleConsumer {
                    assert_eq!(idle(&w[0]), idle(&w[1]));
                }
                match why {
                    TieBreak::IdleConsumer => assert!(!idle(&w[0]) && idle(&w[1])),
                    TieBreak::StoreWait => assert!(!waits(&w[0]) && waits(&w[1])),
                    TieBreak::LatencySlack => {
                        assert_eq!(waits(&w[0]), waits(&w[1]));
                        assert!(slack(&w[0]) > slack(&w[1]));
                    }
                    TieBreak::DramBytes => {
                        assert_eq!(waits(&w[0]), waits(&w[1]));
                        assert_eq!(slack(&w[0]), slack(&w[1]));
                        assert!(dram(&w[0]) < dram(&w[1]));
                    }
                    TieBreak::GroupedRaster => {
                        assert_eq!(waits(&w[0]), waits(&w[1]));
                        assert_eq!(slack(&w[0]), slack(&w[1]));
                        assert_eq!(dram(&w[0]), dram(&w[1]));
                        // Twins but for the raster order, the grouped one first.
                        let mut plain = w[0].plan.clone();
                        plain.raster = w[1].plan.raster;
                        assert_eq!(plain, w[1].plan);
                        assert!(w[0].plan.raster.group_m > w[1].plan.raster.group_m);
                    }
                    TieBreak::Label => {
                        assert_eq!(waits(&w[0]), waits(&w[1]));
                        assert_eq!(slack(&w[0]), slack(&w[1]));
                        assert_eq!(dram(&w[0]), dram(&w[1]));
                    }
                }
            }
        }
    }
}

fn arb_constraint() -> impl Strategy<Value = Constraint> {
    let observable = prop_oneof![
        (8192.0..240000.0f64).prop_map(|v| (Observable::Smem, ConstraintOp::Le, v.round())),
        (24.0..255.0f64).prop_map(|v| (Observable::Registers, ConstraintOp::Le, v.round())),
        (1.0..4.0f64).prop_map(|v| (Observable::Occupancy, ConstraintOp::Ge, v.round())),
        (0.1..0.9f64).prop_map(|v| (Observable::TensorUtil, ConstraintOp::Ge, v)),
        (0.5..8.0f64).prop_map(|v| (Observable::Waves, ConstraintOp::Le, v)),
        (0.0..1.0f64).prop_map(|v| (Observable::L2HitRate, ConstraintOp::Ge, v)),
    ];
    let tile = prop_oneof![
        prop::sample::select(vec![16.0, 32.0, 64.0, 128.0, 256.0]).prop_map(|v| (
            TileVar::TILE_M,
            ConstraintOp::Eq,
            v
        )),
        prop::sample::select(vec![32.0, 64.0, 128.0]).prop_map(|v| (
            TileVar::TILE_N,
            ConstraintOp::Ge,
            v
        )),
        (1.0..6.0f64).prop_map(|v| (TileVar::STAGES, ConstraintOp::Le, v.round())),
    ];
    prop_oneof![
        observable.prop_map(|(o, op, v)| constraint(o, op, v)),
        tile.prop_map(|(t, op, v)| tile_constraint(t, op, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the constraints and shape, no returned plan breaks a hard constraint, and the
    /// search answers with plans or an error value (never a panic).
    #[test]
    fn returned_plans_meet_every_hard_constraint(
        m in 1u64..5000, n in 1u64..9000, k in 1u64..9000,
        constraints in prop::collection::vec(arb_constraint(), 0..4),
    ) {
        let mut spec = fixed(DType::Bf16, m, n, k);
        spec.constraints = constraints.clone();
        match search(&spec) {
            Ok(result) => {
                for b in &result.buckets {
                    for c in b.candidates.iter().chain(&b.model_only) {
                        for constraint in &constraints {
                            let rhs = match constraint.rhs { CExpr::Number(x) => x, _ => unreachable!() };
                            let lhs = match &constraint.lhs {
                                CExpr::Observable(o) => observable_value(c, *o),
                                CExpr::TileVar(TileVar::TILE_M) => c.plan.tile.m as f64,
                                CExpr::TileVar(TileVar::TILE_N) => c.plan.tile.n as f64,
                                CExpr::TileVar(TileVar::STAGES) => c.plan.stages as f64,
                                other => unreachable!("{other:?}"),
                            };
                            let tol = 1e-6 * rhs.abs().max(1.0);
                            let ok = match constraint.op {
                                ConstraintOp::Le => lhs <= rhs + tol,
                                ConstraintOp::Ge => lhs >= rhs - tol,
                                ConstraintOp::Eq => (lhs - rhs).abs() <= tol,
                                ConstraintOp::Near => true,
                            };
                            prop_assert!(ok, "{} breaks `{}` ({lhs})", c.label, constraint.text);
                        }
                        prop_assert!(!c.prediction.registers.spills);
                    }
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn compute_bound_twins_go_to_fewer_dram_bytes() {
    // At 4096^3 plans that differ only in their raster order are predicted equally fast
    // (compute-bound); the one that moves the fewest DRAM bytes wins (on sm80, the grouped
    // 256x128 measured fastest at 8192^3-16384^3: bench/RESULTS.md, 89a343b).
    let spec = fixed(DType::Bf16, 4096, 4096, 4096);
    let result = search(&spec).unwrap();
    let b = &result.buckets[0];
    let (winner, runner_up) = (&b.candidates[0], &b.candidates[1]);
    assert_eq!(winner.score_us, runner_up.score_us);
    assert_eq!(tie_break(winner, runner_up).1, TieBreak::DramBytes);
    assert!(winner.prediction.movement.dram_bytes < runner_up.prediction.movement.dram_bytes);
    assert!(winner.label.starts_with("sm90 "), "{}", winner.label);
}

/// An fp8 A declared M-major is transposed by the launcher for sm90; `transposes == 0` keeps the
/// declared layouts, and with sm90 forced the message names that constraint and what it costs.
#[test]
fn transposes_counts_the_launchers_transposes() {
    let mut spec = fixed(DType::E4m3, 4096, 7168, 2048);
    for op in spec.operands.iter_mut() {
        match op.role {
            Role::A => op.layout = deepgemm::spec::Layout::Col,
            Role::D => op.dtype = DType::Bf16,
            _ => {}
        }
    }
    let free = search(&spec).unwrap();
    let winner = free.buckets[0].winner();
    assert_eq!(winner.plan.backend, Backend::Sm90);
    assert_eq!(observable_value(winner, Observable::Transposes), 1.0);

    spec.constraints = vec![constraint(Observable::Transposes, ConstraintOp::Eq, 0.0)];
    let kept = search(&spec).unwrap();
    assert!(kept.buckets[0]
        .candidates
        .iter()
        .all(|c| observable_value(c, Observable::Transposes) == 0.0
            && c.plan.backend != Backend::Sm90));

    spec.constraints.push(Constraint {
        lhs: CExpr::Observable(Observable::Backend),
        op: ConstraintOp::Eq,
        rhs: CExpr::Backend(Backend::Sm90),
        text: "backend == sm90".to_string(),
    });
    let message = match search(&spec) {
        Err(e @ SearchError::Infeasible { .. }) => e.to_string(),
        other => panic!("expected infeasible, got {other:?}"),
    };
    assert!(
        message.contains("`transposes == 0` admits no plan; the nearest has 1 (sm90"),
        "{message}"
    );
}

#[test]
fn a_ping_pong_plan_with_one_tile_a_block_loses_a_tie() {
    // 2047x1023x4095 in 128 tiles of 128 x 128 (or 64 x 256): one tile per block, so a ping-pong
    // plan's second consumer idles. The model predicts it and the cooperative plan within 10 ns;
    // the cooperative one wins (measured 47.3-49.8 us against 50.8-54.3: bench/RESULTS.md).
    let spec = fixed(DType::Bf16, 2047, 1023, 4095);
    let result = search(&spec).unwrap();
    let candidates = &result.buckets[0].candidates;
    let winner = &candidates[0];
    assert!(!winner.plan.threads.pingpong(), "{}", winner.label);
    let idle = candidates
        .iter()
        .find(|c| c.score_us == winner.score_us && c.plan.threads.pingpong())
        .expect("a ping-pong plan ties the winner");
    assert!(idle.prediction.schedule.waves.waves <= 1.0);
    assert_eq!(
        tie_break(winner, idle),
        (Ordering::Less, TieBreak::IdleConsumer)
    );
}
