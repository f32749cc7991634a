//! The search on specs written in `.dgml`: every example plans, and bad constraints get clear
//! messages (unknown names from the parser, contradictions and infeasibility from the search).

use deepgemm::report::{render_markdown, Analysis};
use deepgemm::search::{search, SearchError};
use deepgemm::spec::{parse_file, parse_str, KernelSpec};
use std::path::Path;

fn kernel(constraints: &str) -> Result<KernelSpec, String> {
    let source = format!(
        "kernel k {{ target h200; input A: bf16[M, K] row; input B: bf16[K, N] col; output D: bf16[M, N] row;
           shape {{ M in 1..=4096; N = 4096; K = 4096; }}
           constraints {{ {constraints} }} }}"
    );
    parse_str(&source, "k.dgml", Path::new("."))
        .map(|mut f| f.kernels.remove(0))
        .map_err(|d| d.to_string())
}

#[test]
fn every_example_is_planned_and_explained() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "dgml") {
            continue;
        }
        let file = parse_file(&path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
        for spec in &file.kernels {
            let result = search(spec).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let md = render_markdown(&Analysis::new(spec, &result, 5));
            assert!(md.contains(&result.buckets[0].winner().label));
            seen += 1;
        }
    }
    assert!(seen >= 7, "{seen} kernels planned");
}

#[test]
fn unknown_observable_is_rejected_with_its_name() {
    let message = kernel("smemory <= 100;").unwrap_err();
    assert!(message.contains("smemory"), "{message}");
}

#[test]
fn contradictions_and_infeasibility_from_dgml() {
    let spec = kernel("smem <= 10 KiB; smem >= 20 KiB;").unwrap();
    let err = search(&spec).unwrap_err();
    assert!(matches!(err, SearchError::Contradictory { .. }), "{err}");
    assert!(err.to_string().contains("<= 10240 and >= 20480"), "{err}");

    let spec = kernel("TILE_M == 64; TILE_M == 128;").unwrap();
    assert!(matches!(
        search(&spec),
        Err(SearchError::Contradictory { .. })
    ));

    let spec = kernel("registers <= 30;").unwrap();
    let err = search(&spec).unwrap_err().to_string();
    assert!(err.contains("admits no plan; the smallest needs"), "{err}");
}
