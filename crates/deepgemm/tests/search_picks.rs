//! The search's picks for every example, on its own target and retargeted to every preset, against
//! the record in `search_picks.txt`: per shape bucket the plans each backend offered, what every
//! rule removed, the top candidates with their predicted times (to the last bit) and registers,
//! a digest of the winner's generated CUDA and one of the analysis `explain` prints. A refactoring of the search, the model or codegen
//! must leave this file unchanged; a change that means to move a pick rewrites it with
//! `DEEPGEMM_BLESS_PICKS=1 cargo nextest run -p deepgemm --test search_picks` and shows the
//! difference in review.

use deepgemm::codegen::generate;
use deepgemm::hw::PRESETS;
use deepgemm::report::{render_markdown, Analysis};
use deepgemm::search::{search, variant_name};
use deepgemm::spec::parse_str;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Candidates recorded per bucket, best first.
const RECORDED_CANDIDATES: usize = 5;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// FNV-1a, 64 bits: a digest that is stable across Rust versions (std's hashers are not).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `source` with every `target NAME;` statement naming `target` instead.
fn retarget(source: &str, target: &str) -> String {
    source
        .lines()
        .map(|line| {
            let indent = line.len() - line.trim_start().len();
            match line.trim_start().strip_prefix("target ") {
                Some(rest) => match rest.find(';') {
                    Some(end) => format!("{}target {target}{}", &line[..indent], &rest[end..]),
                    None => line.to_string(),
                },
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The record of one spec file compiled as written (`target` = None) or for another preset.
fn record(out: &mut String, path: &Path, target: Option<&str>) {
    let name = path.file_name().unwrap().to_string_lossy();
    let source = std::fs::read_to_string(path).unwrap();
    let source = match target {
        Some(t) => retarget(&source, t),
        None => source,
    };
    let heading = format!("{name} @ {}", target.unwrap_or("as written"));
    let file = match parse_str(&source, &name, &examples_dir()) {
        Ok(file) => file,
        Err(d) => {
            let first = d.to_string().lines().next().unwrap_or("").to_string();
            writeln!(out, "== {heading}: spec error: {first}").unwrap();
            return;
        }
    };
    for spec in &file.kernels {
        writeln!(
            out,
            "== {heading}: kernel {} on {}",
            spec.name, spec.hardware.name
        )
        .unwrap();
        let result = match search(spec) {
            Ok(r) => r,
            Err(e) => {
                writeln!(out, "  search error: {e}").unwrap();
                continue;
            }
        };
        for (i, b) in result.buckets.iter().enumerate() {
            writeln!(
                out,
                "  {} at {}: enumerated {} {:?}, feasible {}",
                variant_name(i, &b.bucket),
                b.shape,
                b.enumerated,
                b.enumerated_by_backend,
                b.feasible
            )
            .unwrap();
            for p in b.pruned.iter().filter(|p| p.violated > 0) {
                writeln!(
                    out,
                    "    pruned `{}`: violated {}, removed {}",
                    p.rule, p.violated, p.removed
                )
                .unwrap();
            }
            for c in b.candidates.iter().take(RECORDED_CANDIDATES) {
                writeln!(
                    out,
                    "    {}: {:?} us, score {:?}, {} registers",
                    c.label, c.prediction.time_us, c.score_us, c.prediction.registers.total
                )
                .unwrap();
            }
            let winner = b.winner();
            let digest = match generate(spec, &winner.plan, &variant_name(i, &b.bucket)) {
                Ok(kernel) => format!("{:016x}", fnv1a(&kernel.source)),
                Err(e) => format!("codegen error: {e}"),
            };
            writeln!(out, "    winner CUDA fnv1a {digest}").unwrap();
        }
        let explained = render_markdown(&Analysis::new(spec, &result, RECORDED_CANDIDATES));
        writeln!(out, "  analysis.md fnv1a {:016x}", fnv1a(&explained)).unwrap();
    }
}

#[test]
fn every_example_keeps_its_picks_on_every_preset() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dgml"))
        .collect();
    paths.sort();
    let mut actual = String::new();
    for path in &paths {
        record(&mut actual, path, None);
        for preset in &PRESETS {
            record(&mut actual, path, Some(preset.name));
        }
    }
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/search_picks.txt");
    if std::env::var_os("DEEPGEMM_BLESS_PICKS").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    if actual != expected {
        let first = actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .unwrap_or(actual.lines().count().min(expected.lines().count()));
        let line = |text: &str| text.lines().nth(first).unwrap_or("<end>").to_string();
        panic!(
            "the search's picks changed (tests/search_picks.txt); first difference at line {}:\n  \
             expected: {}\n  actual:   {}",
            first + 1,
            line(&expected),
            line(&actual)
        );
    }
}
