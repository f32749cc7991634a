//! Every generated kernel configuration compiles with NVRTC to a cubin for each architecture it
//! targets, with no register spills and no stack frame (ptxas's verbose report).
//!
//! Needs NVRTC (no GPU), which scripts/test.sh installs: without it the tests fail, unless
//! `DEEPGEMM_SKIP_NVRTC=1` skips them (see nvrtc_support).

#[path = "../../deepgemm/tests/codegen_specs/mod.rs"]
mod codegen_specs;
mod nvrtc_support;

use codegen_specs::{simt_plan, sm80_plan, sm90_plan, spec, SpecShape};
use cudarc::nvrtc::result as nvrtc;
use deepgemm::codegen::{generate, GeneratedKernel};
use deepgemm::dtype::DType;
use deepgemm::plan::{Backend, Plan};
use deepgemm::spec::{KernelSpec, Layout};
use nvrtc_support::nvrtc_or_skip;
use std::ffi::{CStr, CString};

/// What ptxas reported for one entry point.
#[derive(Debug)]
struct PtxasReport {
    registers: u32,
    spill_bytes: u32,
    stack_bytes: u32,
}

/// Compiles `kernel` to a cubin for `arch` (e.g. `sm_90`) and returns ptxas's report, or the
/// compiler log as the error.
fn compile(kernel: &GeneratedKernel, arch: &str) -> Result<PtxasReport, String> {
    let source = CString::new(kernel.source.as_str()).map_err(|e| e.to_string())?;
    let name = CString::new("kernel.cu").expect("no interior NUL");
    let program =
        nvrtc::create_program(&source, Some(name.as_c_str())).map_err(|e| format!("{e:?}"))?;
    let options = [
        format!("--gpu-architecture={arch}"),
        "--ptxas-options=-v".to_string(),
    ];
    // SAFETY: `program` was just created and is destroyed once, below.
    let compiled = unsafe { nvrtc::compile_program(program, &options) };
    let log = unsafe { nvrtc::get_program_log(program) }
        .map(|chars| {
            let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
            CStr::from_bytes_until_nul(&bytes)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    unsafe { nvrtc::destroy_program(program) }.map_err(|e| format!("{e:?}"))?;
    compiled.map_err(|e| format!("{e:?}\n{log}"))?;
    // ptxas waits after every wgmma when it cannot prove that no accumulator register of one in
    // flight is touched: correct, but the main loop then runs one wgmma at a time.
    if let Some(line) = log
        .lines()
        .find(|l| l.contains("wgmma.mma_async instructions are serialized"))
    {
        return Err(format!("ptxas serialized the wgmmas: {line}"));
    }
    parse_ptxas(&log, &kernel.entry).ok_or_else(|| format!("no ptxas report in:\n{log}"))
}

/// Reads "N bytes stack frame, S bytes spill stores, L bytes spill loads" and "Used R registers"
/// from the lines after "Function properties for ENTRY".
fn parse_ptxas(log: &str, entry: &str) -> Option<PtxasReport> {
    let start = log.find(&format!("Function properties for {entry}"))?;
    let section = &log[start..];
    let number_before = |text: &str, marker: &str| -> Option<u32> {
        let end = text.find(marker)?;
        text[..end].split_whitespace().last()?.parse().ok()
    };
    let registers_at = section.find("Used ")? + "Used ".len();
    let registers = section[registers_at..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(PtxasReport {
        registers,
        spill_bytes: number_before(section, " bytes spill stores")?
            + number_before(section, " bytes spill loads")?,
        stack_bytes: number_before(section, " bytes stack frame")?,
    })
}

/// Compiles each case for each architecture; fails listing every case that did not compile
/// cleanly. Prints the register table (run with --nocapture to see it).
fn check_all(cases: &[(String, KernelSpec, Plan)], archs: &[&str]) {
    let mut failures = Vec::new();
    for (label, spec, plan) in cases {
        let kernel = match generate(spec, plan, "v0") {
            Ok(kernel) => kernel,
            Err(e) => {
                failures.push(format!("{label}: generate failed: {e}"));
                continue;
            }
        };
        for arch in archs {
            match compile(&kernel, arch) {
                Ok(report) => {
                    // The register layer of the model against ptxas: the model decides which
                    // plans spill, so a plan it admits must compile without spilling.
                    let predicted = deepgemm::model::registers::analyze(
                        plan,
                        spec.a().dtype.size_bytes(),
                        &spec.hardware,
                    );
                    println!(
                        "{label:<58} {arch:<6} {:>3} registers (model {:>3}), smem {:>6} B",
                        report.registers, predicted.total, kernel.smem_bytes
                    );
                    if report.spill_bytes > 0 || report.stack_bytes > 0 {
                        failures.push(format!(
                            "{label} {arch}: {report:?} (the model predicted {} registers{})",
                            predicted.total,
                            if predicted.spills {
                                ", a spill"
                            } else {
                                ", no spill"
                            }
                        ));
                    }
                }
                Err(log) => failures.push(format!("{label} {arch}: {log}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

const TENSOR_ARCHS: [&str; 4] = ["sm_80", "sm_86", "sm_89", "sm_90"];

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::Row => "row",
        Layout::Col => "col",
    }
}

#[test]
fn sm80_layouts_and_epilogues() {
    if !nvrtc_or_skip("sm80_layouts_and_epilogues") {
        return;
    }
    let mut cases = Vec::new();
    let layouts = [Layout::Row, Layout::Col];
    for input in [DType::Bf16, DType::F16, DType::Tf32] {
        for a_layout in layouts {
            for b_layout in layouts {
                let shape = SpecShape {
                    input,
                    a_layout,
                    b_layout,
                    ..SpecShape::default()
                };
                let s = spec(&shape);
                let plan = sm80_plan(&s, (128, 128, 32), 4, (2, 2));
                let label = format!(
                    "sm80 {input} A {} B {} 128x128x32 s4",
                    layout_name(a_layout),
                    layout_name(b_layout)
                );
                cases.push((label, s, plan));
            }
        }
    }
    let epilogues = [
        (
            "D col",
            SpecShape {
                d_layout: Layout::Col,
                ..SpecShape::default()
            },
        ),
        (
            "C row alpha/beta",
            SpecShape {
                c_layout: Some(Layout::Row),
                ..SpecShape::default()
            },
        ),
        (
            "C col alpha/beta, D col",
            SpecShape {
                c_layout: Some(Layout::Col),
                d_layout: Layout::Col,
                ..SpecShape::default()
            },
        ),
        (
            "f16 out",
            SpecShape {
                input: DType::F16,
                output: DType::F16,
                ..SpecShape::default()
            },
        ),
        (
            "f32 out",
            SpecShape {
                output: DType::F32,
                ..SpecShape::default()
            },
        ),
        (
            "e4m3 out",
            SpecShape {
                output: DType::E4m3,
                ..SpecShape::default()
            },
        ),
        (
            "e5m2 out, D col",
            SpecShape {
                output: DType::E5m2,
                d_layout: Layout::Col,
                ..SpecShape::default()
            },
        ),
        (
            "tf32 -> f32 out",
            SpecShape {
                input: DType::Tf32,
                output: DType::F32,
                ..SpecShape::default()
            },
        ),
        (
            "bias+gelu",
            SpecShape {
                bias_gelu: true,
                ..SpecShape::default()
            },
        ),
    ];
    for (what, shape) in epilogues {
        let s = spec(&shape);
        let plan = sm80_plan(&s, (128, 128, 32), 4, (2, 2));
        cases.push((format!("sm80 {what} 128x128x32 s4"), s, plan));
    }
    check_all(&cases, &TENSOR_ARCHS);
}

#[test]
fn sm80_tile_configs() {
    if !nvrtc_or_skip("sm80_tile_configs") {
        return;
    }
    let mut cases = Vec::new();
    let configs = [
        ((128, 256, 32), 3, (2, 4)),
        ((256, 128, 32), 3, (4, 2)),
        ((128, 128, 64), 3, (2, 2)),
        ((64, 64, 32), 4, (2, 2)),
        ((64, 128, 32), 4, (2, 2)),
        ((128, 64, 32), 5, (2, 2)),
    ];
    for (tile, stages, warps) in configs {
        for (what, shape) in [
            (
                "bf16 bias+gelu",
                SpecShape {
                    bias_gelu: true,
                    ..SpecShape::default()
                },
            ),
            (
                "bf16 A col B row",
                SpecShape {
                    a_layout: Layout::Col,
                    b_layout: Layout::Row,
                    ..SpecShape::default()
                },
            ),
        ] {
            let s = spec(&shape);
            let plan = sm80_plan(&s, tile, stages, warps);
            let label = format!(
                "sm80 {what} {}x{}x{} s{stages} w{}x{}",
                tile.0, tile.1, tile.2, warps.0, warps.1
            );
            cases.push((label, s, plan));
        }
    }
    check_all(&cases, &["sm_80", "sm_90"]);
}

#[test]
fn simt_dtypes_layouts_and_scales() {
    if !nvrtc_or_skip("simt_dtypes_layouts_and_scales") {
        return;
    }
    let mut cases = Vec::new();
    let inputs = [
        (DType::F32, DType::F32),
        (DType::F16, DType::F32),
        (DType::Bf16, DType::F32),
        (DType::E4m3, DType::F32),
        (DType::E5m2, DType::F32),
        (DType::I8, DType::I32),
        (DType::I8, DType::F32),
    ];
    for (input, accumulate) in inputs {
        let s = spec(&SpecShape {
            input,
            accumulate,
            output: DType::F32,
            ..SpecShape::default()
        });
        let plan = simt_plan(&s, (128, 128, 8), 2);
        cases.push((
            format!("simt {input} acc {accumulate} 128x128x8 s2"),
            s,
            plan,
        ));
    }
    let layouts = [Layout::Row, Layout::Col];
    for a_layout in layouts {
        for b_layout in layouts {
            for d_layout in layouts {
                let s = spec(&SpecShape {
                    a_layout,
                    b_layout,
                    d_layout,
                    ..SpecShape::default()
                });
                let plan = simt_plan(&s, (64, 64, 16), 1);
                let label = format!(
                    "simt bf16 A {} B {} D {} 64x64x16 s1",
                    layout_name(a_layout),
                    layout_name(b_layout),
                    layout_name(d_layout)
                );
                cases.push((label, s, plan));
            }
        }
    }
    for (output, amax_per_row) in [(DType::E4m3, Some(true)), (DType::E5m2, Some(false))] {
        let s = spec(&SpecShape {
            output,
            amax_per_row,
            ..SpecShape::default()
        });
        let plan = simt_plan(&s, (64, 64, 16), 2);
        cases.push((format!("simt bf16 -> {output} 64x64x16 s2"), s, plan));
    }
    let fp8 = spec(&SpecShape {
        input: DType::E4m3,
        block_scales: true,
        bias_gelu: true,
        ..SpecShape::default()
    });
    let plan = simt_plan(&fp8, (128, 64, 16), 2);
    cases.push((
        "simt e4m3 1x128/128x128 scales + bias+gelu 128x64x16 s2".to_string(),
        fp8,
        plan,
    ));
    let small = spec(&SpecShape {
        c_layout: Some(Layout::Col),
        ..SpecShape::default()
    });
    let plan = simt_plan(&small, (32, 32, 8), 2);
    cases.push((
        "simt bf16 C col alpha/beta 32x32x8 s2".to_string(),
        small,
        plan,
    ));
    check_all(&cases, &["sm_75", "sm_80", "sm_90"]);
}

/// Every variant `deepgemm compile` would write for the shipped examples (one per shape bucket,
/// the search's winner) compiles cleanly for every architecture.
/// The files of the repository's `dir` whose names end in `.EXT`, in name order.
fn repo_files(dir: &str, ext: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_example_variant_compiles_for_every_arch() {
    if !nvrtc_or_skip("every_example_variant_compiles_for_every_arch") {
        return;
    }
    let mut cases = Vec::new();
    for path in repo_files("examples", "dgml") {
        let file = deepgemm::spec::parse_file(&path).unwrap_or_else(|d| panic!("{d}"));
        for spec in file.kernels {
            let result = deepgemm::search::search(&spec).unwrap_or_else(|e| panic!("{e}"));
            for variant in result.variants() {
                let label = format!("{} {} {}", spec.name, variant.name, variant.plan.label());
                cases.push((label, spec.clone(), variant.plan));
            }
        }
    }
    assert!(cases.len() >= 15, "{} variants", cases.len());
    // wgmma and setmaxnreg exist on sm_90a alone; the other plans run on every tensor-core arch.
    let (sm90, others): (Vec<_>, Vec<_>) = cases
        .into_iter()
        .partition(|(_, _, plan)| plan.backend == Backend::Sm90);
    assert!(!sm90.is_empty(), "the Hopper examples plan sm90 variants");
    check_all(&sm90, &["sm_90a"]);
    check_sass(&sm90);
    check_all(&others, &TENSOR_ARCHS);
}

/// The plan the model picks for each shape of every benchmark suite (`bench/suites`: the shapes
/// of bench/RESULTS.md's figures) compiles for sm_90a without spills, and an sm90 pick's SASS has
/// no local memory: the register model checked on the plans that are timed, not only on the
/// configurations listed here (a per-tensor fp8 build whose 256x128 pick spilled ran three to
/// four times slower, bench/RESULTS.md 2026-12-06). Shapes that give the same source compile once.
#[test]
fn every_bench_suite_pick_compiles_without_spills() {
    if !nvrtc_or_skip("every_bench_suite_pick_compiles_without_spills") {
        return;
    }
    let mut sources = std::collections::HashSet::new();
    let (mut sm90, mut others) = (Vec::new(), Vec::new());
    for path in repo_files("bench/suites", "toml") {
        let suite = deepgemm::suite::Suite::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let file = deepgemm::spec::parse_file(&suite.spec).unwrap_or_else(|d| panic!("{d}"));
        let spec = match &suite.kernel {
            Some(name) => file.kernels.into_iter().find(|k| &k.name == name),
            None => file.kernels.into_iter().next(),
        }
        .unwrap_or_else(|| panic!("{}: no such kernel in its spec", path.display()));
        for shape in &suite.shapes {
            let mut at = spec.clone();
            at.shape = deepgemm::spec::ShapeSpec::fixed(*shape);
            let result = deepgemm::search::search(&at).unwrap_or_else(|e| panic!("{e}"));
            let plan = result.buckets[0].winner().plan.clone();
            let source = generate(&at, &plan, "v0").unwrap().source;
            if sources.insert(source) {
                let label = format!("{} {shape} {}", suite.name, plan.label());
                let cases = if plan.backend == Backend::Sm90 {
                    &mut sm90
                } else {
                    &mut others
                };
                cases.push((label, at, plan));
            }
        }
    }
    assert!(!sm90.is_empty(), "the suites target Hopper");
    check_all(&sm90, &["sm_90a"]);
    check_sass(&sm90);
    check_all(&others, &["sm_90a"]);
}

/// Every sm90 configuration the generator offers (schedules, layouts, dtypes, clusters, odd tile
/// widths) compiles for sm_90a, and its SASS runs on wgmma with no local memory.
#[test]
fn sm90_configs_compile_to_hgmma_without_local_memory() {
    if !nvrtc_or_skip("sm90_configs_compile_to_hgmma_without_local_memory") {
        return;
    }
    let mut cases = Vec::new();
    // (tile, stages, consumers, ping-pong, cluster)
    let configs = [
        ((128, 256), 4, 2, false, 2),
        ((128, 208), 4, 2, false, 2),
        // One staged-epilogue buffer per warp: two do not fit beside five 128 x 192 stages.
        ((128, 192), 5, 2, false, 2),
        ((256, 128), 4, 2, false, 1),
        ((128, 128), 6, 2, true, 2),
        ((64, 256), 5, 2, true, 2),
        ((64, 24), 8, 2, true, 1),
        ((128, 104), 7, 1, false, 1),
    ];
    for layouts in [
        (Layout::Row, Layout::Col, Layout::Row),
        (Layout::Col, Layout::Row, Layout::Col),
    ] {
        for (input, output) in [(DType::Bf16, DType::Bf16), (DType::F16, DType::F32)] {
            let s = spec(&SpecShape {
                input,
                output,
                a_layout: layouts.0,
                b_layout: layouts.1,
                d_layout: layouts.2,
                ..SpecShape::default()
            });
            for (tile, stages, consumers, pingpong, cluster) in configs {
                let plan = sm90_plan(&s, tile, stages, consumers, pingpong, cluster);
                // Not every width suits every layout (N-major B is staged in 64-column boxes)
                // and f32 staging takes more shared memory: keep the ones the generator offers.
                if deepgemm::codegen::check_supported(&s, &plan).is_err() {
                    continue;
                }
                let label = format!(
                    "sm90 {input}->{output} {}{}{} {}",
                    layout_name(layouts.0),
                    layout_name(layouts.1),
                    layout_name(layouts.2),
                    plan.label()
                );
                cases.push((label, s.clone(), plan));
            }
        }
    }
    // tf32 (K-major only, m64nNk8, TFLOAT32 tensor maps), f32 D both ways and a bf16 D.
    for (output, d_layout) in [
        (DType::F32, Layout::Row),
        (DType::F32, Layout::Col),
        (DType::Bf16, Layout::Row),
    ] {
        let s = spec(&SpecShape {
            input: DType::Tf32,
            output,
            d_layout,
            ..SpecShape::default()
        });
        for (tile, stages, consumers, pingpong, cluster) in configs {
            let plan = sm90_plan(&s, tile, stages, consumers, pingpong, cluster);
            if deepgemm::codegen::check_supported(&s, &plan).is_err() {
                continue;
            }
            let kernel = generate(&s, &plan, "v0").unwrap();
            assert!(
                kernel.source.contains("m64n") && kernel.source.contains("k8.f32.tf32.tf32"),
                "{}",
                plan.label()
            );
            let label = format!(
                "sm90 tf32->{output} {} {}",
                layout_name(d_layout),
                plan.label()
            );
            cases.push((label, s.clone(), plan));
        }
    }
    // fp8 with block scales (two-level accumulation: twice the accumulators), D both ways.
    let fp8_configs = [
        ((128, 128), 6, 2, false, 2),
        ((128, 112), 6, 2, false, 1),
        ((64, 128), 8, 2, true, 2),
        ((64, 64), 8, 1, false, 1),
        // The wider cooperative tiles (up to 160 accumulators with the partial sums), one of them
        // two m64 slices per consumer, and two-block B scales with split steps of 4, 2 and 1.
        ((128, 160), 5, 2, false, 2),
        ((128, 144), 6, 2, false, 1),
        ((128, 136), 6, 2, false, 1),
        ((256, 80), 4, 2, false, 1),
        // Two m64 slices per consumer sharing one slice of partial sums: DeepGEMM's 256x128.
        ((256, 128), 4, 2, false, 2),
        ((256, 112), 4, 2, false, 2),
        // A ping-pong two-block tile.
        ((64, 112), 8, 2, true, 2),
        // 96 sums and 96 partial sums per consumer thread, the epilogue deferred into the next
        // tile's first k-tile: two-block B scales, two consumers and one.
        ((128, 192), 5, 2, false, 2),
        ((64, 192), 6, 1, false, 1),
    ];
    // fp8 without K-block scales (per-tensor scales are applied in the epilogue), up to 192
    // columns per consumer, and two m64 slices per consumer (the per-tensor pick of the fp8
    // suite's largest shapes: a build whose 256x128 per-tensor kernel spilled ran 3-4x slower,
    // bench/RESULTS.md 2026-12-06 "turns").
    let fp8_unscaled_configs = [
        ((64, 128), 8, 2, true, 2),
        ((128, 128), 6, 2, false, 2),
        ((128, 176), 5, 2, false, 2),
        ((128, 192), 5, 2, false, 2),
        ((256, 128), 4, 2, false, 2),
    ];
    for (block_scales, d_layout, output) in [
        (true, Layout::Row, DType::Bf16),
        (true, Layout::Col, DType::Bf16),
        (false, Layout::Row, DType::Bf16),
        // fp8 D: staged through shared memory (4 pieces of 16 bytes per row) and stored direct,
        // with an amax per row and per tensor.
        (false, Layout::Row, DType::E4m3),
        (false, Layout::Col, DType::E5m2),
    ] {
        let s = spec(&SpecShape {
            input: DType::E4m3,
            output,
            block_scales,
            d_layout,
            amax_per_row: output.is_fp8().then_some(d_layout == Layout::Row),
            ..SpecShape::default()
        });
        let configs: &[_] = if block_scales {
            &fp8_configs
        } else {
            &fp8_unscaled_configs
        };
        for &(tile, stages, consumers, pingpong, cluster) in configs {
            let plan = deepest_sm90_plan(&s, tile, stages, consumers, pingpong, cluster);
            let label = format!(
                "sm90 e4m3 {} {} {}",
                if block_scales {
                    "blocks r c"
                } else {
                    "unscaled"
                },
                layout_name(d_layout),
                plan.label()
            );
            cases.push((label, s.clone(), plan));
        }
    }
    // A's K-block scales: M-major ([M, K/128] col) come by TMA; row-major ones are copied row by
    // row by the producer warp's lanes, which must fit the producer's registers too.
    for a_scales in [Layout::Col, Layout::Row] {
        let mut s = spec(&SpecShape {
            input: DType::E4m3,
            output: DType::Bf16,
            block_scales: true,
            ..SpecShape::default()
        });
        let sa = s.operands.iter_mut().find(|o| o.name == "sa").unwrap();
        sa.layout = a_scales;
        for (tile, stages, consumers, pingpong, cluster) in [
            ((256, 128), 4, 2, false, 2),
            ((128, 160), 5, 2, false, 2),
            ((64, 128), 8, 2, true, 2),
        ] {
            let plan = deepest_sm90_plan(&s, tile, stages, consumers, pingpong, cluster);
            let kernel = deepgemm::codegen::generate(&s, &plan, "v0").unwrap();
            let by_tma = a_scales == Layout::Col;
            assert!(
                kernel
                    .source
                    .contains(&format!("constexpr bool A_SCALES_BY_TMA = {by_tma};")),
                "{}",
                plan.label()
            );
            let label = format!(
                "sm90 e4m3 A scales {} {}",
                layout_name(a_scales),
                plan.label()
            );
            cases.push((label, s.clone(), plan));
        }
    }
    // fp8 declared M-major (A col) and N-major (B row): the launcher transposes both, and the
    // kernel is the K-major one, the header saying so.
    for block_scales in [true, false] {
        let s = spec(&SpecShape {
            input: DType::E4m3,
            output: DType::Bf16,
            block_scales,
            a_layout: Layout::Col,
            b_layout: Layout::Row,
            ..SpecShape::default()
        });
        let plan = deepest_sm90_plan(&s, (128, 128), 6, 2, false, 2);
        let kernel = deepgemm::codegen::generate(&s, &plan, "v0").unwrap();
        assert_eq!(kernel.transposed, ["A", "B"]);
        assert!(
            kernel
                .source
                .contains("A: the launcher transposes it (declared col)"),
            "{}",
            &kernel.source[..1500]
        );
        let label = format!(
            "sm90 e4m3 transposed A and B, scaled {block_scales} {}",
            plan.label()
        );
        cases.push((label, s, plan));
    }
    assert!(cases.len() >= 30, "{} sm90 configurations", cases.len());
    check_all(&cases, &["sm_90a"]);
    check_sass(&cases);
}

/// The sm90 plan of `stages` stages, or of the most that fit beside the epilogue's buffers (f32
/// D's staged rows are twice a 16-bit D's).
fn deepest_sm90_plan(
    spec: &KernelSpec,
    tile: (u32, u32),
    stages: u32,
    consumers: u32,
    pingpong: bool,
    cluster: u32,
) -> Plan {
    (2..=stages)
        .rev()
        .map(|s| sm90_plan(spec, tile, s, consumers, pingpong, cluster))
        .find(|plan| deepgemm::codegen::check_supported(spec, plan).is_ok())
        .unwrap_or_else(|| panic!("no sm90 plan of {tile:?} fits"))
}

/// The SASS of each sm90 case: `HGMMA` (`QGMMA` for fp8) present (wgmma, not mma.sync's
/// `HMMA`), no `LDL`/`STL`, and the wgmmas not serialized: a k-tile's k steps (four in every
/// sm90 kernel) issue back to back, so only a group's last carries the scoreboard (`gsb0`) that
/// a wait reads. Where ptxas cannot prove a wgmma's accumulators untouched until its wait
/// (warning C7514, e.g. a wgmma in flight across a branch), it waits after every wgmma of the
/// kernel: each then carries `gsb0`.
/// cuobjdump comes from `DEEPGEMM_CUOBJDUMP` or `.cuda-tools/nvidia/cu13/bin` (scripts/test.sh
/// installs it there); without it the test fails, unless `DEEPGEMM_SKIP_NVRTC=1`.
fn check_sass(cases: &[(String, KernelSpec, Plan)]) {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cuobjdump = std::env::var_os("DEEPGEMM_CUOBJDUMP")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo.join(".cuda-tools/nvidia/cu13/bin/cuobjdump"));
    if !cuobjdump.exists() {
        assert!(
            std::env::var(nvrtc_support::SKIP_VAR).is_ok_and(|v| v == "1"),
            "no cuobjdump at {}: `bash scripts/test.sh` installs it with
    python3 -m pip \
             install --target .cuda-tools 'nvidia-cuda-cuobjdump==13.2.*' \
             'nvidia-cuda-nvdisasm==13.2.*'",
            cuobjdump.display()
        );
        eprintln!("SKIPPED the SASS checks: no cuobjdump and DEEPGEMM_SKIP_NVRTC=1");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (label, spec, plan) in cases {
        let kernel = generate(spec, plan, "v0").unwrap();
        let compiled = deepgemm_cuda::nvrtc::compile(&kernel.source, &kernel.entry, "sm_90a")
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let path = dir.path().join("kernel.cubin");
        std::fs::write(&path, &compiled.cubin).unwrap();
        let out = std::process::Command::new(&cuobjdump)
            .arg("--dump-sass")
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", cuobjdump.display()));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sass = String::from_utf8_lossy(&out.stdout);
        let count = |op: &str| sass.matches(op).count();
        // wgmma on 16-bit and tf32 inputs is HGMMA, on fp8 QGMMA.
        let mma = if spec.a().dtype.size_bytes() == 1 {
            "QGMMA"
        } else {
            "HGMMA"
        };
        let unscored = sass
            .lines()
            .filter(|line| line.contains(mma) && !line.contains("gsb0"))
            .count();
        if count(mma) == 0 || count("LDL") > 0 || count("STL") > 0 || unscored == 0 {
            failures.push(format!(
                "{label}: {} {mma} ({unscored} issued back to back), {} LDL, {} STL",
                count(mma),
                count("LDL"),
                count("STL")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
