//! Benchmark suites as data (`bench/suites/*.toml`): a spec to instantiate and the shapes to run.
//!
//! ```toml
//! name = "odd"
//! spec = "../../examples/gemm_bf16.dgml"   # relative to the suite file
//! kernel = "gemm_bf16"                      # only needed when the spec declares several
//! shapes = [[4095, 4097, 4093], [1000, 3000, 2000]]
//! # or a product: every M with every (N, K)
//! m = [1, 2, 4]
//! nk = [[4096, 4096]]
//! ```

use crate::plan::Shape;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A loaded suite: the spec file it instantiates and its shapes, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    pub name: String,
    pub spec: PathBuf,
    /// The kernel of the spec to run, when it declares several.
    pub kernel: Option<String>,
    pub shapes: Vec<Shape>,
}

#[derive(Debug, Error)]
pub enum SuiteError {
    #[error("cannot read suite {path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: {message}")]
    Malformed { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    spec: String,
    kernel: Option<String>,
    #[serde(default)]
    shapes: Vec<[u64; 3]>,
    #[serde(default)]
    m: Vec<u64>,
    #[serde(default)]
    nk: Vec<[u64; 2]>,
}

impl Suite {
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(path).map_err(|e| SuiteError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Suite::parse(&text, &path.display().to_string(), base)
    }

    /// Parse suite text; `base` is the directory the spec path is relative to.
    pub fn parse(text: &str, path: &str, base: &Path) -> Result<Suite, SuiteError> {
        let malformed = |message: String| SuiteError::Malformed {
            path: path.to_string(),
            message,
        };
        let file: SuiteFile = toml::from_str(text).map_err(|e| malformed(e.to_string()))?;
        if file.m.is_empty() != file.nk.is_empty() {
            return Err(malformed(
                "`m` and `nk` go together: every M is run with every (N, K)".into(),
            ));
        }
        let mut shapes: Vec<Shape> = file
            .shapes
            .iter()
            .map(|&[m, n, k]| Shape::new(m, n, k))
            .collect();
        for &m in &file.m {
            shapes.extend(file.nk.iter().map(|&[n, k]| Shape::new(m, n, k)));
        }
        if shapes.is_empty() {
            return Err(malformed(
                "no shapes: give `shapes = [[M, N, K], ...]` or `m = [...]` with `nk = [[N, K], ...]`"
                    .into(),
            ));
        }
        if let Some(bad) = shapes.iter().find(|s| s.m == 0 || s.n == 0 || s.k == 0) {
            return Err(malformed(format!(
                "shape {bad} has a zero extent; M, N and K must be >= 1"
            )));
        }
        Ok(Suite {
            name: file.name,
            spec: base.join(file.spec),
            kernel: file.kernel,
            shapes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Suite, SuiteError> {
        Suite::parse(text, "t.toml", Path::new("bench/suites"))
    }

    #[test]
    fn shapes_and_products() {
        let s = parse(
            "name = \"x\"\nspec = \"a.dgml\"\nshapes = [[1, 2, 3]]\nm = [4, 5]\nnk = [[6, 7]]\n",
        )
        .unwrap();
        assert_eq!(s.spec, Path::new("bench/suites/a.dgml"));
        assert_eq!(
            s.shapes,
            vec![
                Shape::new(1, 2, 3),
                Shape::new(4, 6, 7),
                Shape::new(5, 6, 7)
            ]
        );
    }

    #[test]
    fn malformed_line_is_located() {
        let e = parse("name = \"x\"\nspec = \"a.dgml\"\nshapes = [[1, 2]]\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.toml:") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn zero_and_empty_are_refused() {
        let e = parse("name = \"x\"\nspec = \"a\"\nshapes = [[0, 2, 3]]\n").unwrap_err();
        assert!(e.to_string().contains("zero extent"), "{e}");
        let e = parse("name = \"x\"\nspec = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("no shapes"), "{e}");
        let e = parse("name = \"x\"\nspec = \"a\"\nm = [1]\n").unwrap_err();
        assert!(e.to_string().contains("go together"), "{e}");
    }

    #[test]
    fn shipped_suites_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/suites");
        for name in ["llm", "square", "odd", "decode", "f32", "fp8", "fp8_tensor"] {
            let suite = Suite::load(&dir.join(format!("{name}.toml"))).unwrap();
            assert_eq!(suite.name, name);
            assert!(suite.spec.exists(), "{}", suite.spec.display());
        }
        let decode = Suite::load(&dir.join("decode.toml")).unwrap();
        assert_eq!(decode.shapes.len(), 6 * 8);
        assert_eq!(Suite::load(&dir.join("llm.toml")).unwrap().shapes.len(), 18);
        // The two FP8 suites measure the same shapes: 6 odd ones, then the llm suite's 18.
        let fp8 = Suite::load(&dir.join("fp8.toml")).unwrap();
        let tensor = Suite::load(&dir.join("fp8_tensor.toml")).unwrap();
        assert_eq!(fp8.shapes.len(), 24);
        assert_eq!(fp8.shapes, tensor.shapes);
        let llm = Suite::load(&dir.join("llm.toml")).unwrap();
        assert_eq!(fp8.shapes[6..], llm.shapes[..]);
    }

    /// `bench` plans each suite shape on its own (the spec's shape block replaced by it), so a
    /// shape outside the spec's declared ones, or with K not a multiple of 128, must still plan.
    #[test]
    fn fp8_suites_plan_at_every_shape() {
        use crate::spec::ShapeSpec;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/suites");
        for name in ["fp8", "fp8_tensor"] {
            let suite = Suite::load(&dir.join(format!("{name}.toml"))).unwrap();
            let file = crate::spec::parse_file(&suite.spec).unwrap_or_else(|d| panic!("{d}"));
            for shape in &suite.shapes {
                let mut spec = file.kernels[0].clone();
                spec.shape = ShapeSpec::fixed(*shape);
                if let Err(e) = crate::search::search(&spec) {
                    panic!("{name} {shape}: {e}");
                }
            }
        }
    }
}
