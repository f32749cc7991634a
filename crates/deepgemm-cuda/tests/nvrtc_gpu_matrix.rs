//! Every kernel of the GPU correctness matrix and of the epilogue tie test, built here without a
//! GPU: the `.dgml` of each case parses, the search finds a plan on the forced backend, codegen renders it, and NVRTC compiles
//! it without spills. A GPU run then only finds numeric bugs, never build failures.

mod gpu_support;
mod nvrtc_support;

use deepgemm::plan::Backend;
use deepgemm_cuda::nvrtc;
use gpu_support::{generate, kernel, matrix, parse, ties};
use nvrtc_support::nvrtc_or_skip;
use std::collections::BTreeMap;

#[test]
fn nvrtc_every_gpu_matrix_kernel_builds() {
    if !nvrtc_or_skip("nvrtc_every_gpu_matrix_kernel_builds") {
        return;
    }
    let mut failures = Vec::new();
    let mut sources = BTreeMap::new();
    for backend in Backend::ALL {
        for case in matrix(backend) {
            match kernel(&case, backend) {
                Ok((_, k)) => {
                    sources.entry(k.source.clone()).or_insert((k, case.name()));
                }
                Err(e) => failures.push(format!("{backend} {}: {e}", case.name())),
            }
        }
        for case in ties::cases() {
            let name = format!("ties D: {} = {}", case.output, case.expr);
            match generate(&parse(&ties::dgml(&case, backend)), backend) {
                Ok(k) => {
                    sources.entry(k.source.clone()).or_insert((k, name));
                }
                Err(e) => failures.push(format!("{backend} {name}: {e}")),
            }
        }
    }
    for (source, (k, name)) in &sources {
        match nvrtc::compile(source, &k.entry, &k.arch) {
            Ok(c) if !c.resources.reported => failures.push(format!(
                "{name} ({}): no ptxas report in the log",
                k.plan.label()
            )),
            Ok(c) if c.resources.spills() => failures.push(format!(
                "{name} ({}): spills {:?}",
                k.plan.label(),
                c.resources
            )),
            Ok(_) => {}
            Err(e) => failures.push(format!("{name} ({}): {e}", k.plan.label())),
        }
    }
    println!("{} distinct kernels", sources.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
