//! The `deepgemm` command line, run as a user would, on the machine CI runs on (no GPU): exit
//! codes, what each command writes, and the clear errors for bad input.

#[path = "../../deepgemm-cuda/tests/nvrtc_support/mod.rs"]
mod nvrtc_support;

use nvrtc_support::nvrtc_or_skip;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deepgemm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn explain_every_example_as_markdown_and_json() {
    for entry in std::fs::read_dir(repo().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "dgml") {
            continue; // examples/c holds the C example
        }
        let path = path.to_str().unwrap();
        let md = deepgemm(&["explain", path, "--top", "3"]);
        assert!(md.status.success(), "{path}: {}", text(&md));
        assert!(text(&md).contains("| chosen |"), "{path}");
        let json = deepgemm(&["explain", path, "--json"]);
        assert!(json.status.success(), "{path}: {}", text(&json));
        let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        for kernel in value.as_array().unwrap() {
            assert_eq!(kernel["schema_version"], 2, "{path}");
            assert!(
                kernel["buckets"][0]["winner"]["label"].is_string(),
                "{path}"
            );
        }
    }
}

#[test]
fn explain_names_the_binding_constraint_of_an_infeasible_spec() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("tight.dgml");
    std::fs::write(
        &spec,
        "kernel tight { target h200; input A: bf16[M, K] row; input B: bf16[K, N] col;
           output D: bf16[M, N] row; shape { M = 4096; N = 4096; K = 4096; }
           constraints { registers <= 40; } }",
    )
    .unwrap();
    let o = deepgemm(&["explain", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("registers <= 40"), "{}", text(&o));
    let json = deepgemm(&["explain", spec.to_str().unwrap(), "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value[0]["error"]["kind"], "infeasible");
}

#[test]
fn compile_writes_sources_binaries_analysis_and_the_dispatch_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = deepgemm(&["compile", "examples/decode.dgml", "-o", out]);
    assert!(o.status.success(), "{}", text(&o));
    let kernel = dir.path().join("decode_qkv");
    for file in ["analysis.md", "analysis.json", "variants.json"] {
        assert!(kernel.join(file).is_file(), "{file}");
    }
    let variants: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kernel.join("variants.json")).unwrap()).unwrap();
    let variants = variants.as_array().unwrap();
    // With NVRTC (found as the binary finds it) every variant has its binary too.
    let nvrtc = nvrtc_or_skip("compile_writes_sources_binaries_analysis_and_the_dispatch_table");
    // decode.dgml declares M in 1..=256: buckets 1-16, 17-32, 33-64, 65-128, 129-256.
    assert_eq!(variants.len(), 5);
    for v in variants {
        let vdir = kernel.join(v["name"].as_str().unwrap());
        let source = std::fs::read_to_string(vdir.join("kernel.cu")).unwrap();
        assert!(source.contains(v["entry"].as_str().unwrap()));
        if nvrtc {
            assert!(vdir.join("kernel.cubin").is_file());
            assert!(vdir.join("kernel.ptx").is_file());
            let registers = v["compiled"]["registers"].as_u64().unwrap();
            assert!((1..=255).contains(&registers), "{v}");
        }
    }
    if nvrtc {
        // ptxas's count reaches the analysis, bucket by bucket.
        let md = std::fs::read_to_string(kernel.join("analysis.md")).unwrap();
        let analysis: serde_json::Value =
            serde_json::from_slice(&std::fs::read(kernel.join("analysis.json")).unwrap()).unwrap();
        for (v, bucket) in variants.iter().zip(analysis["buckets"].as_array().unwrap()) {
            let registers = &v["compiled"]["registers"];
            assert_eq!(&bucket["ptxas"]["registers"], registers, "{bucket}");
            assert!(md.contains(&format!("ptxas allocates {registers}")), "{md}");
        }
    }
}

#[test]
fn compile_without_nvrtc_still_writes_the_source_and_says_how_to_get_it() {
    // A copy of the binary outside the repository, run from an empty folder with no loader
    // path, cannot find the NVRTC that the test command installed under the repository.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("deepgemm");
    std::fs::copy(env!("CARGO_BIN_EXE_deepgemm"), &exe).unwrap();
    let spec = repo().join("examples/gemm_bf16.dgml");
    let o = Command::new(&exe)
        .args(["compile", spec.to_str().unwrap(), "-o", "out"])
        .current_dir(dir.path())
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DEEPGEMM_NVRTC_DIR")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        // No automatic `deepgemm setup` (pip) here, and no NVRTC it installed earlier.
        .env("DEEPGEMM_NO_SETUP", "1")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !dir.path().join("out/gemm_bf16.dgb").exists(),
        "no bundle without cubins"
    );
    let variant = dir.path().join("out/gemm_bf16/v0_m4096");
    assert!(variant.join("kernel.cu").is_file());
    if Path::new("/usr/local/cuda/lib64/libnvrtc.so.13").exists() {
        // A system CUDA is found by its standard path: then the binary is built.
        assert!(variant.join("kernel.cubin").is_file());
    } else {
        assert!(text(&o).contains("pip install"), "{}", text(&o));
        assert!(text(&o).contains("sources only"), "{}", text(&o));
        assert!(!variant.join("kernel.cubin").exists());
    }
}

#[test]
fn bench_refuses_a_malformed_suite_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.toml");
    std::fs::write(
        &suite,
        "name = \"bad\"\nspec = \"x.dgml\"\nshapes = [[1, 2]]\n",
    )
    .unwrap();
    let o = deepgemm(&["bench", suite.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bad.toml"), "{}", text(&o));
}

#[test]
fn commands_that_need_a_gpu_fail_clearly_without_one() {
    // No device visible (or no driver at all, as on CI): an error, never a panic.
    for args in [
        vec!["run", "examples/gemm_bf16.dgml"],
        vec!["bench", "bench/suites/odd.toml"],
        vec!["tune", "examples/gemm_bf16.dgml", "--top", "1"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
            .args(&args)
            .current_dir(repo())
            .env("CUDA_VISIBLE_DEVICES", "")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(69), "{args:?}: {}", text(&o));
        let message = text(&o).to_lowercase();
        assert!(
            message.contains("error:") && (message.contains("gpu") || message.contains("driver")),
            "{args:?}: {message}"
        );
        assert!(!message.contains("panicked"), "{args:?}: {message}");
    }
}

#[test]
fn run_refuses_a_bad_shape_argument() {
    let o = deepgemm(&["run", "examples/gemm_bf16.dgml", "--shape", "4096,0,7"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(
        text(&o).contains("N = `0` must be a whole number >= 1"),
        "{}",
        text(&o)
    );
}

#[test]
fn tune_replays_a_recorded_run_without_a_gpu() {
    let o = deepgemm(&["tune", "--replay", "bench/results/2026-12-01/tune.json"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("as recorded:") && out.contains("with the current model"));
    assert!(out.contains("ranking quality"), "{out}");
}

/// docs/cli.md documents every command and every flag that `--help` shows.
#[test]
fn the_cli_reference_documents_every_command_and_flag() {
    let doc = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let mut missing = Vec::new();
    for command in [
        "check", "targets", "explain", "compile", "run", "bench", "tune",
    ] {
        if !doc.contains(&format!("## `deepgemm {command}`")) {
            missing.push(format!("the section of `{command}`"));
        }
        let help = text(&deepgemm(&[command, "--help"]));
        let flags = help
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|word| word.starts_with("--") && *word != "--help");
        for flag in flags {
            // A flag is documented in its command's option table.
            if !doc.contains(&format!("`{flag}")) {
                missing.push(format!("`{command} {flag}`"));
            }
        }
    }
    // The options of `deepgemm` itself (`--version`): its help's Options section, as the
    // commands' descriptions above it name their own flags.
    let help = text(&deepgemm(&["--help"]));
    let options = help.split("Options:").nth(1).unwrap_or_default();
    let options = options.split("Exit codes:").next().unwrap_or_default();
    assert!(options.contains("--version"), "{help}");
    for flag in options
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| word.starts_with("--") && *word != "--help")
    {
        if !doc.contains(&format!("`deepgemm {flag}`")) {
            missing.push(format!("`deepgemm {flag}`"));
        }
    }
    assert!(missing.is_empty(), "docs/cli.md lacks {missing:?}");
}

/// Extents the kernels' `int` parameters cannot hold are refused before anything runs, with
/// the limit named: in a spec (`check`) and on the command line (`--shape`).
#[test]
fn extents_past_the_kernel_abi_are_refused_with_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("huge.dgml");
    std::fs::write(
        &spec,
        "kernel huge { target h200; input A: bf16[M, K] row; input B: bf16[K, N] col;
           output D: bf16[M, N] row; shape { M = 1099511627776; N = 4096; K = 4096; } }",
    )
    .unwrap();
    for command in ["check", "explain", "compile"] {
        let o = deepgemm(&[command, spec.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", text(&o));
        assert!(text(&o).contains("at most 2147418112"), "{}", text(&o));
        assert!(text(&o).contains("huge.dgml:2:"), "{}", text(&o));
    }
    let o = deepgemm(&[
        "run",
        "examples/gemm_bf16.dgml",
        "--shape",
        "2147483648,4096,4096",
    ]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("at most 2147418112"), "{}", text(&o));
}

/// A spec whose only plans run on the CUDA-core fallback says so in check, explain and compile,
/// with why each faster backend cannot; an M-major fp8 A on Hopper is transposed by the launcher
/// instead, which check and explain say.
#[test]
fn the_simt_fallback_is_reported_by_check_explain_and_compile() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // fp8 on Ada: sm80's mma.sync takes no fp8 and there is no wgmma, so the CUDA cores.
    let path = dir.path().join("fp8_ada.dgml");
    let example = std::fs::read_to_string(repo().join("examples/fp8_block_scaled.dgml")).unwrap();
    std::fs::write(&path, example.replace("target h200;", "target l40s;")).unwrap();
    let spec = path.to_str().unwrap();
    for args in [
        vec!["check", spec],
        vec!["explain", spec],
        vec!["compile", spec, "-o", out],
    ] {
        let o = deepgemm(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains("slow path: every plan runs on the CUDA-core fallback"),
            "{args:?}: {t}"
        );
        assert!(
            t.contains("sm80 cannot: its mma.sync generator takes"),
            "{args:?}: {t}"
        );
    }
    // On Hopper an M-major fp8 A stays on wgmma: the launcher transposes it, and they say so.
    let path = dir.path().join("fp8_m_major.dgml");
    std::fs::write(
        &path,
        example.replace("input  A: e4m3[M, K] row;", "input  A: e4m3[M, K] col;"),
    )
    .unwrap();
    let spec = path.to_str().unwrap();
    for args in [vec!["check", spec], vec!["explain", spec]] {
        let o = deepgemm(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(!t.contains("slow path"), "{args:?}: {t}");
        assert!(
            t.contains("`A` is M-major (`col`): sm90's kernel reads e4m3 K-major only"),
            "{args:?}: {t}"
        );
    }
}

/// A hard constraint that makes every plan slower is reported with its cost.
#[test]
fn a_constraint_that_slows_every_plan_is_reported_with_its_cost() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("waves.dgml");
    std::fs::write(
        &spec,
        "kernel decode { target h100; input A: bf16[M, K] row; input B: bf16[K, N] col;
           output D: bf16[M, N] row; shape { M = 16; N = 6144; K = 4096; }
           constraints { waves >= 0.9; } }",
    )
    .unwrap();
    let o = deepgemm(&["explain", spec.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("`waves >= 0.9` costs"), "{t}");
    assert!(t.contains("without it: 20.9 us"), "{t}");
    assert!(t.contains("with it: 21.4 us"), "{t}");
    let json = deepgemm(&["explain", spec.to_str().unwrap(), "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let cost = &value[0]["buckets"][0]["constraint_costs"][0];
    assert_eq!(cost["constraint"], "waves >= 0.9");
    assert!(cost["without_us"].as_f64().unwrap() < cost["with_us"].as_f64().unwrap());
}

/// `compile` replaces a kernel's folder: after a second run it holds exactly that run's variants
/// (no variant, source or binary of the first run is left beside them) and no partial folder.
#[test]
fn compile_replaces_the_kernels_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let spec = dir.path().join("k.dgml");
    let write_spec = |shape: &str| {
        std::fs::write(
            &spec,
            format!(
                "kernel k {{ target h200; input A: bf16[M, K] row; input B: bf16[K, N] col;
                   output D: bf16[M, N] row; shape {{ {shape} }} }}"
            ),
        )
        .unwrap();
    };
    let compile = || {
        let o = deepgemm(&[
            "compile",
            spec.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
    };
    write_spec("M in 1..=64; N = 256; K = 256;");
    compile();
    let kernel = out.join("k");
    std::fs::write(kernel.join("v0_m1-16").join("stale.cubin"), b"old").unwrap();
    write_spec("M = 512; N = 256; K = 256;");
    compile();
    let mut names: Vec<String> = std::fs::read_dir(&kernel)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["analysis.json", "analysis.md", "v0_m512", "variants.json"],
        "only this run's files"
    );
    let mut leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    leftovers.sort();
    assert_eq!(leftovers, ["k", "k.dgb"], "no partial folder is left");
}

/// Writing into a closed pipe ends quietly: no panic, no exit code 101.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .args(["explain", "examples/mlp_up.dgml", "--top", "32"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the first write: every write then fails with EPIPE.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(o.status.code(), Some(101), "{stderr}");
}

/// Exit codes tell the failures apart (`deepgemm --help` lists them): spec errors 2, usage 64,
/// I/O 74, no GPU 69.
#[test]
fn exit_codes_tell_failures_apart() {
    let missing = deepgemm(&["check", "no/such/spec.dgml"]);
    assert_eq!(missing.status.code(), Some(74), "{}", text(&missing));
    // A file that cannot be read has no line or column to point at.
    assert!(
        !text(&missing).contains("spec.dgml:1:1"),
        "{}",
        text(&missing)
    );
    assert!(text(&missing).contains("cannot read no/such/spec.dgml"));
    let missing = deepgemm(&["explain", "no/such/spec.dgml"]);
    assert_eq!(missing.status.code(), Some(74), "{}", text(&missing));
    let usage = deepgemm(&["explain", "examples/mlp_up.dgml", "--top", "many"]);
    assert_eq!(usage.status.code(), Some(64), "{}", text(&usage));
    assert_eq!(deepgemm(&["frobnicate"]).status.code(), Some(64));
    let help = deepgemm(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    for line in ["64  usage", "69  no GPU", "74  I/O", "2   spec errors"] {
        assert!(text(&help).contains(line), "--help lacks {line:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.dgml");
    std::fs::write(&bad, "kernel k { target b200; }").unwrap();
    assert_eq!(
        deepgemm(&["check", bad.to_str().unwrap()]).status.code(),
        Some(2)
    );
    // No GPU (none visible): 69 (commands_that_need_a_gpu_fail_clearly_without_one).
}

/// A spec whose one error is at line 2, column 10.
const UNKNOWN_TARGET: &str = "kernel k {
  target b200;
  input A: bf16[M, K] row; input B: bf16[K, N] col; output D: bf16[M, N] row;
  shape { M = 1; N = 1; K = 1; }
}";

/// `check --json` prints each file's summaries, or its errors, as JSON on stdout, with the exit
/// code of the text form.
#[test]
fn check_json_prints_summaries_or_errors() {
    let o = deepgemm(&["check", "examples/decode.dgml", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let value: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kernel = &value[0]["kernels"][0];
    assert_eq!(kernel["kernel"], "decode_qkv");
    assert_eq!(kernel["operands"][0]["role"], "A");
    assert_eq!(kernel["shape"][0], "M in 1..=256");
    assert_eq!(kernel["buckets"].as_array().unwrap().len(), 5);
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.dgml");
    std::fs::write(&bad, UNKNOWN_TARGET).unwrap();
    let o = deepgemm(&["check", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let value: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let error = &value[0]["errors"][0];
    assert_eq!(error["message"], "unknown target `b200`");
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_u64()),
        (Some(2), Some(10))
    );
    let o = deepgemm(&["check", "no/such.dgml", "--json"]);
    assert_eq!(o.status.code(), Some(74), "{}", text(&o));
    let value: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(value[0]["errors"][0]["line"].is_null(), "no fake position");
}

/// `explain --json` on a spec that does not check prints its errors as JSON, not text.
#[test]
fn explain_json_prints_spec_errors_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.dgml");
    std::fs::write(&bad, UNKNOWN_TARGET).unwrap();
    let o = deepgemm(&["explain", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let value: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(value["errors"][0]["message"], "unknown target `b200`");
    assert_eq!(value["file"], bad.to_str().unwrap());
}

/// `--version` names the crate version, the commit built from, and NVRTC and the driver as
/// found at run time.
#[test]
fn version_names_the_commit_nvrtc_and_driver() {
    let o = deepgemm(&["--version"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.starts_with(&format!("deepgemm {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{t}"
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(head) = head {
        let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
        assert!(t.contains(&format!("(commit {head})")), "{t}");
    }
    let nvrtc = nvrtc_or_skip("version_names_the_commit_nvrtc_and_driver");
    let line = t
        .lines()
        .find(|l| l.starts_with("nvrtc"))
        .unwrap_or_default();
    assert_eq!(line.contains("not found"), !nvrtc, "{t}");
    assert!(t.lines().any(|l| l.starts_with("driver")), "{t}");
    assert_eq!(deepgemm(&[]).status.code(), Some(64), "no command is usage");
}

/// The seed documents' command lines are usage errors with the v1 spelling, one hint per flag.
#[test]
fn seed_document_flags_get_the_v1_spelling() {
    let o = deepgemm(&["--list-targets"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("hint: the presets are listed by `deepgemm targets`"));
    let o = deepgemm(&[
        "compile",
        "--hardware",
        "hw.yaml",
        "--op",
        "x.dgemm",
        "--output",
        "dir/",
    ]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    let t = text(&o);
    for hint in [
        "`hardware \"hw.yaml\";`",
        "`deepgemm compile x.dgml -o DIR`",
        "the output folder is `-o DIR`",
    ] {
        assert!(t.contains(hint), "{t}");
    }
}

#[test]
fn compile_writes_a_bundle_that_inspect_describes() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo().join("examples/c/gemm.dgml");
    let o = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .args(["compile", spec.to_str().unwrap(), "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let bundle = dir.path().join("gemm.dgb");
    let o = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .arg("inspect")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    for needle in [
        "DeepGEMM bundle, format 3",
        "sm_90a",
        "kernel linear",
        "param  alpha = 1",
        "M in 1..=512, N = 256, K = 384",
        "v0_m1-16",
    ] {
        assert!(
            text(&o).contains(needle),
            "inspect lacks `{needle}`:\n{}",
            text(&o)
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .args(["inspect", "--json"])
        .arg(&bundle)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["format_version"], 3);
    assert!(json["kernels"][0]["variants"][0]["kernel"]
        .get("source")
        .is_none());
    // Not a bundle: exit 2 with the reason.
    let junk = dir.path().join("junk.dgb");
    std::fs::write(&junk, b"junk").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_deepgemm"))
        .arg("inspect")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("is not a valid bundle: it does not start with the bundle magic"),
        "{}",
        text(&o)
    );
}
