//! Semantic analysis: syntax tree → [`KernelSpec`]. Resolves every name (dtypes, targets, shape
//! symbols, observables, tile variables, functions), infers operand roles from their dims and
//! checks that the kernel is one DeepGEMM can build. Every problem becomes a diagnostic at the
//! span that causes it; analysis goes on after an error so that one run reports them all.

use super::ast::*;
use super::diag::{did_you_mean, Diagnostic, Span, MAX_DIAGNOSTICS};
use super::print;
use super::types::*;
use crate::codegen::{support, MAX_EXTENT};
use crate::dtype::DType;
use crate::hw::{self, Hardware};
use crate::plan::Backend;
use std::collections::HashMap;
use std::path::Path;

/// Analyse every kernel of a file. Kernels with errors are left out of the result; their
/// diagnostics are in `diags`.
pub fn analyze(
    kernels: &[KernelAst],
    src: &str,
    file: &str,
    base_dir: &Path,
    diags: &mut Vec<Diagnostic>,
) -> Vec<KernelSpec> {
    let line_starts = std::iter::once(0)
        .chain(src.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut cx = Cx {
        line_starts,
        file,
        base_dir,
        diags,
        discarded: Diagnostic::error(file, Span::default(), ""),
        declared: Vec::new(),
    };
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut out = Vec::new();
    for kernel in kernels {
        if let Some(first) = seen.get(kernel.name.text.as_str()) {
            let line = cx.line_of(*first);
            cx.error(
                kernel.name.span,
                format!("kernel `{}` is declared twice", kernel.name.text),
            )
            .hint = Some(format!(
                "the first `{}` is on line {line}",
                kernel.name.text
            ));
        } else {
            seen.insert(&kernel.name.text, kernel.name.span);
        }
        if let Some(spec) = cx.kernel(kernel) {
            out.push(spec);
        }
    }
    out
}

struct Cx<'a> {
    /// Byte offset of the start of each line, for "declared on line N" hints.
    line_starts: Vec<usize>,
    file: &'a str,
    base_dir: &'a Path,
    diags: &'a mut Vec<Diagnostic>,
    /// Where errors past [`MAX_DIAGNOSTICS`] go, unrecorded.
    discarded: Diagnostic,
    /// Every operand and param name of the kernel being analysed, resolved or not: a use of a
    /// name whose declaration had an error is not reported again.
    declared: Vec<String>,
}

/// The items of one kernel, sorted by kind (each block at most once).
#[derive(Default)]
struct Items<'k> {
    targets: Vec<TargetItem<'k>>,
    operands: Vec<&'k OperandDecl>,
    params: Vec<&'k ParamDecl>,
    accumulate: Option<&'k Name>,
    epilogue: Option<(&'k Name, &'k AExpr)>,
    shape: Option<(&'k [ShapeItem], Span)>,
    constraints: Option<&'k [ConstraintAst]>,
    tiling: Option<&'k [TilingEntry]>,
}

/// `target NAME;` or `hardware "file";`
enum TargetItem<'k> {
    Preset(&'k Name),
    File { path: &'k str, span: Span },
}

impl TargetItem<'_> {
    fn span(&self) -> Span {
        match self {
            TargetItem::Preset(name) => name.span,
            TargetItem::File { span, .. } => *span,
        }
    }
}

/// Every known target name, for messages.
fn known_targets() -> String {
    hw::preset_names().join(", ")
}

/// The observable a seed document's name for it means (`register_usage`), where it is too far
/// from the `.dgml` name for a did-you-mean.
fn seed_observable(name: &str) -> Option<&'static str> {
    Some(match name {
        "register_usage" | "register_count" | "regs_per_thread" => "registers",
        "sm_mem" | "sm_mem_limit" | "shared_memory" | "smem_usage" => "smem",
        "use_hmma" => "use_tensor_cores",
        "tensor_core_utilization" => "tensor_util",
        _ => return None,
    })
}

fn dtype_list() -> String {
    DType::ALL.map(DType::name).join(", ")
}

impl Cx<'_> {
    /// Record an error. Past [`MAX_DIAGNOSTICS`] it is dropped (the caller may still fill in
    /// the returned diagnostic), which bounds the work on a file full of errors.
    fn error(&mut self, span: Span, message: impl Into<String>) -> &mut Diagnostic {
        if self.flooded() {
            self.discarded = Diagnostic::error(self.file, span, message);
            return &mut self.discarded;
        }
        self.diags.push(Diagnostic::error(self.file, span, message));
        self.diags.last_mut().expect("just pushed")
    }

    fn flooded(&self) -> bool {
        self.diags.len() >= MAX_DIAGNOSTICS
    }

    fn line_of(&self, span: Span) -> usize {
        self.line_starts
            .partition_point(|&start| start <= span.start)
    }

    fn kernel(&mut self, kernel: &KernelAst) -> Option<KernelSpec> {
        if self.flooded() {
            return None;
        }
        let errors_before = self.diags.len();
        let items = self.sort_items(kernel);
        self.declared = (items.operands.iter().map(|o| &o.name))
            .chain(items.params.iter().map(|p| &p.name))
            .map(|n| n.text.clone())
            .collect();
        let hardware = self.target(kernel, &items);
        self.check_names(&items);
        let shape = items
            .shape
            .map(|(entries, span)| self.shape(entries, span, kernel));
        if items.shape.is_none() && !kernel.incomplete {
            self.error(
                kernel.name.span,
                format!("kernel `{}` has no `shape` block", kernel.name.text),
            )
            .hint = Some("add e.g. `shape { M = 4096; N = 4096; K = 4096; }`".to_string());
        }
        let fixed = shape.as_ref().map(Fixed::of).unwrap_or_default();
        let mut operands: Vec<Option<Operand>> = items
            .operands
            .iter()
            .map(|d| self.operand(d, &fixed))
            .collect();
        self.check_roles(kernel, &items.operands, &mut operands, hardware.as_ref());
        let operands: Vec<Operand> = operands.into_iter().flatten().collect();
        let params: Vec<Param> = items.params.iter().filter_map(|p| self.param(p)).collect();
        let accumulate = self.accumulate(items.accumulate, &operands);
        let epilogue = self.epilogue(items.epilogue, &operands, &params);
        // Only for an otherwise sound kernel: after an error, "never read" is usually a cascade.
        if let (Some(epilogue), false) = (&epilogue, self.diags.len() > errors_before) {
            self.check_inputs_are_read(&items.operands, &operands, epilogue);
        }
        let constraints = items
            .constraints
            .map(|cs| cs.iter().filter_map(|c| self.constraint(c)).collect())
            .unwrap_or_default();
        let tiling = items.tiling.map(|ts| self.tiling(ts)).unwrap_or_default();

        if self.diags.len() > errors_before || self.flooded() {
            return None;
        }
        let (target, hardware) = hardware?;
        Some(KernelSpec {
            name: kernel.name.text.clone(),
            target,
            hardware,
            operands,
            params,
            accumulate: accumulate?,
            epilogue: epilogue?,
            shape: shape??,
            constraints,
            tiling,
        })
    }

    fn sort_items<'k>(&mut self, kernel: &'k KernelAst) -> Items<'k> {
        let mut items = Items::default();
        for item in &kernel.items {
            match item {
                Item::Target(name) => items.targets.push(TargetItem::Preset(name)),
                Item::Hardware { path, span } => {
                    items.targets.push(TargetItem::File { path, span: *span })
                }
                Item::Operand(op) => items.operands.push(op),
                Item::Param(p) => items.params.push(p),
                Item::Accumulate(dtype) => {
                    if items.accumulate.replace(dtype).is_some() {
                        self.error(dtype.span, "`accumulate` is given twice");
                    }
                }
                Item::Epilogue { output, expr } => {
                    if items.epilogue.replace((output, expr)).is_some() {
                        self.error(output.span, "`epilogue` is given twice").hint =
                            Some("a kernel has one epilogue expression".to_string());
                    }
                }
                Item::Shape(entries, span) => {
                    if items.shape.replace((entries, *span)).is_some() {
                        self.error(*span, "`shape` block is given twice");
                    }
                }
                Item::Constraints(cs, span) => {
                    if items.constraints.replace(cs).is_some() {
                        self.error(*span, "`constraints` block is given twice").hint =
                            Some("put all constraints in one block".to_string());
                    }
                }
                Item::Tiling(ts, span) => {
                    if items.tiling.replace(ts).is_some() {
                        self.error(*span, "`tiling` block is given twice").hint =
                            Some("put all tiling domains in one block".to_string());
                    }
                }
            }
        }
        items
    }

    // ---- target -------------------------------------------------------------------------

    fn target(&mut self, kernel: &KernelAst, items: &Items) -> Option<(TargetRef, Hardware)> {
        let Some(first) = items.targets.first() else {
            if kernel.incomplete {
                return None;
            }
            self.error(
                kernel.name.span,
                format!("kernel `{}` has no target", kernel.name.text),
            )
            .hint = Some(format!(
                "add `target NAME;` ({}) or `hardware \"file.yaml\";`",
                known_targets()
            ));
            return None;
        };
        for extra in &items.targets[1..] {
            self.error(extra.span(), "the target is given twice").hint =
                Some("a kernel has one `target` or `hardware` line".to_string());
        }
        match first {
            TargetItem::Preset(name) => match hw::preset(&name.text) {
                Some(hardware) => Some((TargetRef::Preset(name.text.clone()), hardware)),
                None => {
                    let hint = did_you_mean(&name.text, hw::preset_names());
                    let d = self.error(name.span, format!("unknown target `{}`", name.text));
                    d.expected = Some(format!(
                        "a built-in target: {}, or `hardware \"file.yaml\"`",
                        known_targets()
                    ));
                    d.hint = hint;
                    None
                }
            },
            TargetItem::File { path, span } => {
                let full = self.base_dir.join(path);
                match Hardware::load(&full) {
                    Ok(hardware) => Some((TargetRef::File(path.to_string()), hardware)),
                    Err(e) => {
                        self.error(*span, format!("cannot use hardware file \"{path}\": {e}"))
                            .hint = Some(format!(
                            "the path is relative to the spec's directory ({})",
                            match self.base_dir.as_os_str().is_empty() {
                                // The spec was named without a folder: it is the current one.
                                true => Path::new("."),
                                false => self.base_dir,
                            }
                            .display()
                        ));
                        None
                    }
                }
            }
        }
    }

    // ---- names --------------------------------------------------------------------------

    /// Operands and params share one namespace; `M N K acc` are taken.
    fn check_names(&mut self, items: &Items) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let names = items
            .operands
            .iter()
            .map(|o| &o.name)
            .chain(items.params.iter().map(|p| &p.name));
        for name in names {
            if matches!(name.text.as_str(), "M" | "N" | "K" | "acc") {
                self.error(name.span, format!("`{}` is a reserved name", name.text))
                    .hint = Some(
                    "`M`, `N`, `K` are the GEMM extents and `acc` the accumulator; pick another name"
                        .to_string(),
                );
            } else if let Some(first) = seen.get(name.text.as_str()) {
                let line = self.line_of(*first);
                self.error(name.span, format!("`{}` is declared twice", name.text))
                    .hint = Some(format!("the first `{}` is on line {line}", name.text));
            } else {
                seen.insert(&name.text, name.span);
            }
        }
    }

    fn dtype(&mut self, name: &Name) -> Option<DType> {
        let found = DType::from_name(&name.text);
        if found.is_none() {
            let hint = did_you_mean(&name.text, DType::ALL.map(DType::name));
            let d = self.error(name.span, format!("unknown dtype `{}`", name.text));
            d.expected = Some(format!("a dtype: {}", dtype_list()));
            d.hint = hint;
        }
        found
    }

    // ---- shape --------------------------------------------------------------------------

    fn shape(
        &mut self,
        items: &[ShapeItem],
        keyword: Span,
        kernel: &KernelAst,
    ) -> Option<ShapeSpec> {
        let mut domains: [Option<DimDomain>; 3] = [None, None, None];
        let mut complete = true;
        let mut fallback: Option<&Name> = None;
        for item in items {
            let entry = match item {
                ShapeItem::Dim(entry) => entry,
                ShapeItem::Fallback(mode) => {
                    if fallback.replace(mode).is_some() {
                        self.error(mode.span, "`fallback` is given twice in `shape`");
                        complete = false;
                    } else if mode.text != "nearest" {
                        let d = self.error(mode.span, format!("unknown fallback `{}`", mode.text));
                        d.expected = Some("`nearest`".to_string());
                        d.hint = Some(
                            "`fallback nearest;` runs a shape outside the declared ones on the \
                             variant of the nearest bucket; without it, such a shape is an error"
                                .to_string(),
                        );
                        complete = false;
                    }
                    continue;
                }
            };
            let Some(sym) = self.shape_sym(&entry.sym) else {
                complete = false;
                continue;
            };
            let slot = &mut domains[sym as usize];
            let domain = self.domain(entry);
            if slot.is_some() {
                self.error(
                    entry.sym.span,
                    format!("`{}` is given twice in `shape`", entry.sym.text),
                );
                complete = false;
            } else if domain.is_none() {
                complete = false;
            }
            if slot.is_none() {
                *slot = domain;
            }
        }
        let missing: Vec<&str> = ["M", "N", "K"]
            .into_iter()
            .zip(&domains)
            .filter(|(_, d)| d.is_none())
            .map(|(name, _)| name)
            .collect();
        if complete && !kernel.incomplete && !missing.is_empty() {
            self.error(keyword, format!(
                "the shape of kernel `{}` does not give {}",
                kernel.name.text,
                missing.join(", ")
            ))
            .hint = Some(format!(
                "each of M, N and K needs `= v`, `in lo..=hi` or `in {{v1, v2}}`, e.g. `{} = 4096;`",
                missing[0]
            ));
        }
        let [m, n, k] = domains;
        Some(ShapeSpec {
            m: m?,
            n: n?,
            k: k?,
            fallback: if fallback.is_some() {
                ShapeFallback::Nearest
            } else {
                ShapeFallback::None
            },
        })
    }

    fn shape_sym(&mut self, name: &Name) -> Option<ShapeSym> {
        let sym = shape_symbol(&name.text);
        if sym.is_none() {
            let hint = did_you_mean(&name.text, ["M", "N", "K"])
                .unwrap_or_else(|| "the shape gives the GEMM extents M, N and K".to_string());
            let d = self.error(name.span, format!("unknown shape symbol `{}`", name.text));
            d.expected = Some("`M`, `N` or `K`".to_string());
            d.hint = Some(hint);
        }
        sym
    }

    fn domain(&mut self, entry: &ShapeEntry) -> Option<DimDomain> {
        let sym = &entry.sym.text;
        let largest = match &entry.domain {
            DomainAst::Fixed(v) => *v,
            DomainAst::Range { lo, hi } => *lo.max(hi),
            DomainAst::Set(values) => values.iter().copied().max().unwrap_or(0),
        };
        if largest > MAX_EXTENT {
            self.error(
                entry.span,
                format!(
                    "`{sym}` reaches {largest}, more than the kernel ABI holds: kernels take \
                     `int {sym}`, at most {MAX_EXTENT} (2^31 - 2^16)"
                ),
            )
            .hint = Some(format!(
                "split the problem into GEMMs of at most {MAX_EXTENT} along {sym}"
            ));
            return None;
        }
        match &entry.domain {
            DomainAst::Fixed(0) => {
                self.error(entry.span, format!("`{sym}` must be at least 1"));
                None
            }
            DomainAst::Fixed(v) => Some(DimDomain::Fixed(*v)),
            DomainAst::Range { lo, hi } if lo > hi => {
                self.error(
                    entry.span,
                    format!("empty range: `{sym} in {lo}..={hi}` has no values"),
                )
                .hint = Some(format!("write the smaller bound first: `{hi}..={lo}`"));
                None
            }
            DomainAst::Range { lo: 0, .. } => {
                self.error(entry.span, format!("`{sym}` must be at least 1"))
                    .hint = Some("start the range at 1".to_string());
                None
            }
            DomainAst::Range { lo, hi } => Some(DimDomain::Range { lo: *lo, hi: *hi }),
            DomainAst::Set(values) => {
                let values = self.int_set(values, entry.span, sym)?;
                Some(DimDomain::Set(values))
            }
        }
    }

    /// A sorted, distinct, non-empty set of positive values.
    fn int_set(&mut self, values: &[u64], span: Span, what: &str) -> Option<Vec<u64>> {
        if values.is_empty() {
            self.error(span, format!("the set of values of `{what}` is empty"))
                .expected = Some("at least one value".to_string());
            return None;
        }
        if values.contains(&0) {
            self.error(span, format!("`{what}` must be at least 1"));
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Some(sorted)
    }

    // ---- operands -----------------------------------------------------------------------

    /// Resolve one operand's dtype and dims and infer its role (scale roles are completed in
    /// `check_roles`, once every operand is known).
    fn operand(&mut self, decl: &OperandDecl, fixed: &Fixed) -> Option<Operand> {
        let dtype = self.dtype(&decl.dtype);
        let dims: Vec<Option<Dim>> = decl.dims.iter().map(|d| self.dim(d)).collect();
        if decl.dims.len() > 2 {
            self.error(
                decl.dims_span,
                format!(
                    "`{}` has {} dims; operands have at most 2",
                    decl.name.text,
                    decl.dims.len()
                ),
            );
            return None;
        }
        if let Some(layout) = &decl.layout {
            if decl.dims.len() < 2 {
                self.error(layout.span, "a layout applies only to matrices (2 dims)")
                    .hint = Some(format!("remove `{}`", layout.text));
            }
        }
        let dims: Vec<Dim> = dims.into_iter().collect::<Option<_>>()?;
        let layout = match decl.layout.as_ref().map(|l| l.text.as_str()) {
            Some("col") => Layout::Col,
            _ => Layout::Row,
        };
        let role = match (&decl.scale_of, &decl.amax_of) {
            // Placeholder granularity; `check_roles` sets the real one.
            (Some(of), None) => Role::Scale {
                of: of.text.clone(),
                granularity: ScaleGranularity::PerTensor,
            },
            (None, Some(of)) => self.amax_role(decl, of, &dims, fixed)?,
            (Some(_), Some(amax)) => {
                self.error(amax.span, "an operand is a scale or an amax, not both");
                return None;
            }
            (None, None) => self.infer_role(decl, &dims, fixed)?,
        };
        Some(Operand {
            name: decl.name.text.clone(),
            direction: decl.direction,
            dtype: dtype?,
            dims,
            layout,
            role,
        })
    }

    fn dim(&mut self, dim: &DimAst) -> Option<Dim> {
        match dim {
            DimAst::Name(name) => self.dim_sym(name).map(Dim::Sym),
            DimAst::Lit(0, span) => {
                self.error(*span, "a dimension must be at least 1");
                None
            }
            DimAst::Lit(v, _) => Some(Dim::Lit(*v)),
            DimAst::Div(_, 0, span) => {
                self.error(*span, "division by zero in a dimension");
                None
            }
            DimAst::Div(name, block, _) => {
                let sym = self.dim_sym(name)?;
                Some(Dim::CeilDiv(sym, *block))
            }
        }
    }

    fn dim_sym(&mut self, name: &Name) -> Option<ShapeSym> {
        let sym = shape_symbol(&name.text);
        if sym.is_none() {
            let hint = did_you_mean(&name.text, ["M", "N", "K"]);
            let d = self.error(name.span, format!("unknown dimension `{}`", name.text));
            d.expected = Some("`M`, `N`, `K`, an integer or `K/128`".to_string());
            d.hint = hint;
        }
        sym
    }

    /// `output NAME: f32 amax_of D;` (one value) or `f32[M]` (one per row). That `of` is the
    /// kernel's D is checked once every operand is known (`check_amax`).
    fn amax_role(
        &mut self,
        decl: &OperandDecl,
        of: &Name,
        dims: &[Dim],
        fixed: &Fixed,
    ) -> Option<Role> {
        let name = &decl.name.text;
        if decl.direction != Direction::Output {
            self.error(
                decl.name.span,
                format!("`{name}` has `amax_of` but is an input"),
            )
            .hint = Some(format!("write `output {name}: f32[] amax_of {};`", of.text));
            return None;
        }
        if decl.dtype.text != "f32" {
            self.error(
                decl.dtype.span,
                format!("an amax is f32, `{name}` is {}", decl.dtype.text),
            )
            .hint = Some(format!(
                "write `output {name}: f32{} amax_of {};`",
                if dims.is_empty() { "[]" } else { "[M]" },
                of.text
            ));
            return None;
        }
        let per_row = match dims {
            [] => false,
            [d] if fixed.matches(d, ShapeSym::M) => true,
            _ => {
                self.error(
                    decl.dims_span,
                    format!("`{name}`: an amax is one value (`f32[]`) or one per row (`f32[M]`)"),
                )
                .hint = Some(format!(
                    "write `output {name}: f32[] amax_of {};` or `output {name}: f32[M] amax_of {};`",
                    of.text, of.text
                ));
                return None;
            }
        };
        Some(Role::Amax {
            of: of.text.clone(),
            per_row,
        })
    }

    /// The role of an operand that is not a scale, from its direction and dims.
    fn infer_role(&mut self, decl: &OperandDecl, dims: &[Dim], fixed: &Fixed) -> Option<Role> {
        use ShapeSym::{K, M, N};
        let is = |pattern: &[ShapeSym]| {
            pattern.len() == dims.len()
                && dims.iter().zip(pattern).all(|(d, s)| fixed.matches(d, *s))
        };
        let written = print::dims(dims);
        if dims.iter().any(|d| matches!(d, Dim::CeilDiv(..))) {
            self.error(
                decl.dims_span,
                format!("`{}` has a block dim but no `scale_of`", decl.name.text),
            )
            .hint = Some(format!(
                "block dims like `K/128` are for FP8 scales: `input {}: f32{written} scale_of A;`",
                decl.name.text
            ));
            return None;
        }
        let candidates: Vec<Role> = match decl.direction {
            Direction::Output => [(&[M, N][..], Role::D)]
                .into_iter()
                .filter(|(p, _)| is(p))
                .map(|(_, r)| r)
                .collect(),
            Direction::Input => [
                (&[M, K][..], Role::A),
                (&[K, N][..], Role::B),
                (&[M, N][..], Role::C),
                (&[M][..], Role::RowVector),
                (&[N][..], Role::ColVector),
                (&[][..], Role::Scalar),
            ]
            .into_iter()
            .filter(|(p, _)| is(p))
            .map(|(_, r)| r)
            .collect(),
        };
        match candidates.as_slice() {
            [role] => Some(role.clone()),
            [] => {
                let name = &decl.name.text;
                let (expected, hint) = match decl.direction {
                    Direction::Output => (
                        "the output D as [M, N]".to_string(),
                        format!("write `output {name}: ...[M, N] row;` (use `col` for a column-major D)"),
                    ),
                    Direction::Input => (
                        "A [M, K], B [K, N], C [M, N], a vector [M] or [N], or a scalar []".to_string(),
                        role_hint(dims),
                    ),
                };
                let d = self.error(
                    decl.dims_span,
                    format!("`{name}` has dims {written}, which fit no operand role"),
                );
                d.expected = Some(expected);
                d.hint = Some(hint);
                None
            }
            _ => {
                self.error(
                    decl.dims_span,
                    format!(
                        "cannot tell the role of `{}` from the literal dims {written}",
                        decl.name.text
                    ),
                )
                .hint =
                    Some("write the shape symbols (`M`, `N`, `K`) instead of numbers".to_string());
                None
            }
        }
    }

    /// Cross-operand checks: one A, B and D; scales resolved; dtypes legal for the target.
    fn check_roles(
        &mut self,
        kernel: &KernelAst,
        decls: &[&OperandDecl],
        operands: &mut [Option<Operand>],
        target: Option<&(TargetRef, Hardware)>,
    ) {
        let mut first_with_role: Vec<(Role, Span)> = Vec::new();
        for (decl, op) in decls.iter().zip(operands.iter()) {
            let Some(op) = op else { continue };
            if !matches!(op.role, Role::A | Role::B | Role::C | Role::D) {
                continue;
            }
            if let Some((_, first)) = first_with_role.iter().find(|(r, _)| *r == op.role) {
                let line = self.line_of(*first);
                let (message, hint) = if op.role == Role::D {
                    (
                        format!("`{}` is a second output; a kernel has exactly one", op.name),
                        format!("the output is declared on line {line}"),
                    )
                } else {
                    (
                        format!(
                            "`{}` is a second {} operand {}",
                            op.name,
                            role_name(&op.role),
                            print::dims(&op.dims)
                        ),
                        format!("the first one is on line {line}"),
                    )
                };
                self.error(decl.name.span, message).hint = Some(hint);
            } else {
                first_with_role.push((op.role.clone(), decl.name.span));
            }
        }
        let all_resolved = operands.iter().all(Option::is_some) && !kernel.incomplete;
        let has = |role: Role| first_with_role.iter().any(|(r, _)| *r == role);
        if all_resolved {
            for (role, example) in [
                (Role::A, "input A: bf16[M, K] row;"),
                (Role::B, "input B: bf16[K, N] col;"),
                (Role::D, "output D: bf16[M, N] row;"),
            ] {
                if !has(role.clone()) {
                    self.error(
                        kernel.name.span,
                        format!(
                            "kernel `{}` has no {} operand",
                            kernel.name.text,
                            role_name(&role)
                        ),
                    )
                    .hint = Some(format!("declare it, e.g. `{example}`"));
                }
            }
        }
        self.check_scales(decls, operands);
        self.check_amax(decls, operands);
        if let Some(d) = operands.iter().flatten().find(|o| o.role == Role::D) {
            if let Some(why) = support::output_refusal(d.dtype) {
                let decl = decls.iter().find(|decl| decl.name.text == d.name);
                let span = decl.map_or_else(|| decl_span(decls, &d.name), |decl| decl.dtype.span);
                let diag = self.error(span, format!("output `{}` is {}: {why}", d.name, d.dtype));
                diag.expected = Some(support::output_dtype_names());
                diag.hint = Some(match d.dtype {
                    DType::I32 | DType::I8 => format!(
                        "write `output {}: f32...`: the integer sum converts to f32 exactly up \
                         to 2^24",
                        d.name
                    ),
                    _ => format!(
                        "write `output {}: bf16...` (or f16, f32, e4m3, e5m2); `cast<{}>(...)` \
                         in the epilogue rounds through {} before the store",
                        d.name, d.dtype, d.dtype
                    ),
                });
            }
        }
        let a = operands.iter().flatten().find(|o| o.role == Role::A);
        let b = operands.iter().flatten().find(|o| o.role == Role::B);
        if let (Some(a), Some(b)) = (a, b) {
            // e4m3 x e5m2 is the fp8 training product (gradients in e5m2); wgmma takes it.
            let fp8 = |d: DType| matches!(d, DType::E4m3 | DType::E5m2);
            if a.dtype != b.dtype && !(fp8(a.dtype) && fp8(b.dtype)) {
                let span = decl_span(decls, &b.name);
                self.error(
                    span,
                    format!(
                        "A (`{}`) is {} but B (`{}`) is {}; A and B must have the same dtype",
                        a.name, a.dtype, b.name, b.dtype
                    ),
                )
                .hint = Some(format!(
                    "mixed inputs are e4m3 x e5m2 only; cast B to {} before the GEMM",
                    a.dtype
                ));
            }
            if let Some((target, hardware)) = target {
                self.check_dtype_on_target(a, decl_span(decls, &a.name), target, hardware);
            }
        }
    }

    fn check_dtype_on_target(
        &mut self,
        a: &Operand,
        span: Span,
        target: &TargetRef,
        hw: &Hardware,
    ) {
        if hw.supports_dtype(a.dtype) {
            return;
        }
        let with_it: Vec<&str> = hw::PRESETS
            .iter()
            .filter(|p| hw::preset(p.name).is_some_and(|h| h.supports_dtype(a.dtype)))
            .map(|p| p.name)
            .collect();
        let target_name = match target {
            TargetRef::Preset(name) => name.clone(),
            TargetRef::File(path) => format!("{} (from \"{path}\")", hw.name),
        };
        let d = self.error(
            span,
            format!(
                "{} inputs are not supported on {target_name} ({})",
                a.dtype, hw.arch
            ),
        );
        let mut supported: Vec<&str> = Vec::new();
        for rate in &hw.mma {
            if !supported.contains(&rate.dtype.name()) {
                supported.push(rate.dtype.name());
            }
        }
        d.expected = Some(format!(
            "an input dtype {target_name} supports: {}",
            supported.join(", ")
        ));
        d.hint = Some(match with_it.as_slice() {
            [] => format!("no built-in target multiplies {} inputs", a.dtype),
            [only] => format!("{only} supports {}: `target {only};`", a.dtype),
            [first, ..] => format!(
                "these targets support {}: {} (e.g. `target {first};`)",
                a.dtype,
                with_it.join(", ")
            ),
        });
    }

    /// `amax_of`: names the kernel's D, at most one per kernel.
    fn check_amax(&mut self, decls: &[&OperandDecl], operands: &[Option<Operand>]) {
        let d = operands
            .iter()
            .flatten()
            .find(|o| o.role == Role::D)
            .map(|o| o.name.clone());
        let mut seen = false;
        for decl in decls {
            let Some(of) = &decl.amax_of else { continue };
            if d.as_deref() != Some(of.text.as_str()) {
                self.error(
                    of.span,
                    format!(
                        "`amax_of {}`: the kernel's output D is {}",
                        of.text,
                        d.as_deref()
                            .map_or("not declared".to_string(), |d| format!("`{d}`"))
                    ),
                )
                .hint = d.as_ref().map(|d| format!("write `amax_of {d}`"));
            } else if seen {
                self.error(decl.name.span, "a kernel has at most one amax output")
                    .hint =
                    Some("keep one: per tensor (`f32[]`) or per row (`f32[M]`)".to_string());
            } else {
                seen = true;
            }
        }
    }

    /// `scale_of`: f32 scales of an FP8 A or B, one per operand, with a known granularity.
    fn check_scales(&mut self, decls: &[&OperandDecl], operands: &mut [Option<Operand>]) {
        let mut scaled: Vec<String> = Vec::new();
        for (i, decl) in decls.iter().enumerate() {
            let (Some(op), Some(of)) = (&operands[i], &decl.scale_of) else {
                continue;
            };
            let target = operands
                .iter()
                .flatten()
                .find(|o| o.name == of.text && matches!(o.role, Role::A | Role::B));
            let Some(target) = target.cloned() else {
                let names: Vec<&str> = operands
                    .iter()
                    .flatten()
                    .filter(|o| matches!(o.role, Role::A | Role::B))
                    .map(|o| o.name.as_str())
                    .collect();
                let hint = did_you_mean(&of.text, names.iter().copied());
                let d = self.error(
                    of.span,
                    format!(
                        "`scale_of {}`: no A or B operand is called `{}`",
                        of.text, of.text
                    ),
                );
                d.expected = Some(format!("the name of A or B ({})", names.join(", ")));
                d.hint = hint;
                continue;
            };
            if op.dtype != DType::F32 {
                self.error(
                    decl.dtype.span,
                    format!("scale `{}` is {}; scales are f32", op.name, op.dtype),
                )
                .hint = Some(format!(
                    "write `input {}: f32{} scale_of {};`",
                    op.name,
                    print::dims(&op.dims),
                    of.text
                ));
            }
            if !target.dtype.is_fp8() {
                self.error(
                    of.span,
                    format!(
                        "`{}` is {}; `scale_of` applies to FP8 operands (e4m3, e5m2)",
                        target.name, target.dtype
                    ),
                );
            }
            if scaled.contains(&target.name) {
                self.error(
                    decl.name.span,
                    format!("`{}` has a second scale tensor", target.name),
                )
                .hint = Some("each FP8 operand has at most one `scale_of`".to_string());
            }
            scaled.push(target.name.clone());
            let granularity = scale_granularity(&target.role, &op.dims);
            if granularity.is_none() {
                let accepted = if target.role == Role::A {
                    "[] (per tensor), [M] (per row) or [M, K/128] (1x128 blocks)"
                } else {
                    "[] (per tensor), [N] (per column), [N, K/128] (1x128 blocks: one column by \
                     128 of K) or [N/128, K/128] (128x128 blocks)"
                };
                self.error(
                    decl.dims_span,
                    format!(
                        "scale dims {} do not fit {} `{}`",
                        print::dims(&op.dims),
                        role_name(&target.role),
                        target.name
                    ),
                )
                .expected = Some(accepted.to_string());
            }
            if let (Some(granularity), Some(op)) = (granularity, &mut operands[i]) {
                op.role = Role::Scale {
                    of: target.name.clone(),
                    granularity,
                };
            }
        }
    }

    // ---- params, accumulate, epilogue ---------------------------------------------------

    fn param(&mut self, decl: &ParamDecl) -> Option<Param> {
        let dtype = self.dtype(&decl.dtype)?;
        if dtype != DType::F32 {
            self.error(
                decl.dtype.span,
                format!("param `{}` is {dtype}; params are f32", decl.name.text),
            )
            .hint = Some(match decl.default {
                // The default is kept: the fix changes the type, not the value.
                Some(v) => format!("write `param {}: f32 = {v};`", decl.name.text),
                None => format!("write `param {}: f32;`", decl.name.text),
            });
            return None;
        }
        Some(Param {
            name: decl.name.text.clone(),
            dtype,
            default: decl.default,
        })
    }

    fn accumulate(&mut self, written: Option<&Name>, operands: &[Operand]) -> Option<DType> {
        let input = operands.iter().find(|o| o.role == Role::A).map(|a| a.dtype);
        let default = match input {
            Some(DType::I8) => DType::I32,
            _ => DType::F32,
        };
        let Some(name) = written else {
            return Some(default);
        };
        let dtype = self.dtype(name)?;
        let Some(input) = input else {
            return Some(dtype);
        };
        // The generators' own rule (codegen::support), so check refuses what compile cannot build.
        if let Some(why) = support::accumulate_refusal(input, dtype) {
            let legal = support::accumulate_dtypes(input);
            let names: Vec<&str> = legal.iter().map(|d| d.name()).collect();
            let d = self.error(name.span, why);
            d.expected = Some(names.join(" or "));
            d.hint = Some(format!("write `accumulate {};` or leave it out", names[0]));
            return None;
        }
        Some(dtype)
    }

    fn epilogue(
        &mut self,
        written: Option<(&Name, &AExpr)>,
        operands: &[Operand],
        params: &[Param],
    ) -> Option<Epilogue> {
        let d = operands.iter().find(|o| o.role == Role::D)?;
        let Some((output, expr)) = written else {
            return Some(Epilogue {
                output: d.name.clone(),
                expr: default_epilogue(operands, params),
            });
        };
        if output.text != d.name {
            let hint = did_you_mean(&output.text, [d.name.as_str()])
                .unwrap_or_else(|| format!("write `epilogue {} = ...;`", d.name));
            let diag = self.error(
                output.span,
                format!(
                    "the epilogue writes `{}`, but the output is `{}`",
                    output.text, d.name
                ),
            );
            diag.expected = Some(format!("`{}`", d.name));
            diag.hint = Some(hint);
        }
        let expr = self.expr(expr, operands, params)?;
        (output.text == d.name).then(|| Epilogue {
            output: d.name.clone(),
            expr,
        })
    }

    /// An input only the epilogue can read (C, a vector, a scalar) that it does not read is a
    /// mistake: the kernel would silently ignore it.
    fn check_inputs_are_read(
        &mut self,
        decls: &[&OperandDecl],
        operands: &[Operand],
        epilogue: &Epilogue,
    ) {
        let read = epilogue.expr.references();
        for op in operands {
            let epilogue_input = matches!(
                op.role,
                Role::C | Role::RowVector | Role::ColVector | Role::Scalar
            );
            if epilogue_input && !read.contains(&op.name) {
                let span = decls
                    .iter()
                    .find(|d| d.name.text == op.name)
                    .map_or_else(Span::default, |d| d.name.span);
                self.error(
                    span,
                    format!(
                        "input `{}` is never read: the epilogue does not use it",
                        op.name
                    ),
                )
                .hint = Some(format!(
                    "use it in `epilogue {} = ...;` or remove the declaration",
                    epilogue.output
                ));
            }
        }
    }

    fn expr(&mut self, e: &AExpr, operands: &[Operand], params: &[Param]) -> Option<Expr> {
        match &e.kind {
            AExprKind::Number(v) => Some(Expr::Number(*v)),
            AExprKind::Var(name) if name == "acc" => Some(Expr::Acc),
            AExprKind::Var(name) => self.var(name, e.span, operands, params),
            AExprKind::Neg(inner) => {
                let inner = self.expr(inner, operands, params)?;
                Some(Expr::Unary(UnaryOp::Neg, Box::new(inner)))
            }
            AExprKind::Binary(op, lhs, rhs) => {
                let lhs = self.expr(lhs, operands, params);
                let rhs = self.expr(rhs, operands, params);
                Some(Expr::Binary(*op, Box::new(lhs?), Box::new(rhs?)))
            }
            AExprKind::Call(name, args) => {
                let args: Vec<Option<Expr>> = args
                    .iter()
                    .map(|a| self.expr(a, operands, params))
                    .collect();
                let func = Func::ALL.into_iter().find(|f| f.name() == name.text);
                let Some(func) = func else {
                    let names = Func::ALL.map(Func::name);
                    let hint = did_you_mean(&name.text, names.iter().copied().chain(["cast"]));
                    let d = self.error(name.span, format!("unknown function `{}`", name.text));
                    d.expected = Some(format!("one of {}, cast<dtype>", names.join(", ")));
                    d.hint = hint;
                    return None;
                };
                if args.len() != func.arity() {
                    let n = func.arity();
                    self.error(
                        e.span,
                        format!(
                            "`{}` takes {n} argument{}, found {}",
                            func.name(),
                            if n == 1 { "" } else { "s" },
                            args.len()
                        ),
                    );
                    return None;
                }
                let args: Vec<Expr> = args.into_iter().collect::<Option<_>>()?;
                Some(Expr::Call(func, args))
            }
            AExprKind::Cast(dtype, inner) => {
                let dtype = self.dtype(dtype);
                let inner = self.expr(inner, operands, params)?;
                Some(Expr::Cast(dtype?, Box::new(inner)))
            }
        }
    }

    /// A name in the epilogue: a param, or an input the epilogue reads element-wise.
    fn var(
        &mut self,
        name: &str,
        span: Span,
        operands: &[Operand],
        params: &[Param],
    ) -> Option<Expr> {
        if params.iter().any(|p| p.name == name) {
            return Some(Expr::Var(name.to_string()));
        }
        if let Some(op) = operands.iter().find(|o| o.name == name) {
            if matches!(
                op.role,
                Role::C | Role::RowVector | Role::ColVector | Role::Scalar
            ) {
                return Some(Expr::Var(name.to_string()));
            }
            self.error(
                span,
                format!(
                    "the epilogue cannot read `{name}`: it is the {} operand",
                    role_name(&op.role)
                ),
            )
            .hint =
                Some("the epilogue sees `acc`, params, C, vector and scalar inputs".to_string());
            return None;
        }
        if self.declared.iter().any(|d| d == name) {
            return None;
        }
        let visible: Vec<&str> = std::iter::once("acc")
            .chain(params.iter().map(|p| p.name.as_str()))
            .chain(
                operands
                    .iter()
                    .filter(|o| {
                        matches!(
                            o.role,
                            Role::C | Role::RowVector | Role::ColVector | Role::Scalar
                        )
                    })
                    .map(|o| o.name.as_str()),
            )
            .collect();
        let hint = did_you_mean(name, visible.iter().copied()).unwrap_or_else(|| {
            format!("declare it (`param {name}: f32;` or `input {name}: ...;`)")
        });
        let d = self.error(span, format!("`{name}` is not declared"));
        d.expected = Some(format!("one of {}", visible.join(", ")));
        d.hint = Some(hint);
        None
    }

    // ---- constraints and tiling ---------------------------------------------------------

    fn constraint(&mut self, c: &ConstraintAst) -> Option<Constraint> {
        let lhs = self.cexpr(&c.lhs, false);
        let rhs = self.cexpr(&c.rhs, false);
        let (lhs, rhs) = (lhs?, rhs?);
        let backend_side = |e: &CExpr| {
            matches!(
                e,
                CExpr::Observable(Observable::Backend) | CExpr::Backend(_)
            )
        };
        let uses_backend = backend_side(&lhs)
            || backend_side(&rhs)
            || has_backend_literal(&lhs)
            || has_backend_literal(&rhs);
        if uses_backend {
            let well_formed = c.op == ConstraintOp::Eq
                && matches!(
                    (&lhs, &rhs),
                    (CExpr::Observable(Observable::Backend), CExpr::Backend(_))
                        | (CExpr::Backend(_), CExpr::Observable(Observable::Backend))
                );
            if !well_formed {
                self.error(
                    c.lhs.span.to(c.rhs.span),
                    "a backend constraint is `backend == NAME`",
                )
                .expected = Some(format!(
                    "`backend == {}`",
                    Backend::ALL.map(Backend::name).join(" | ")
                ));
                return None;
            }
        }
        let text = print::constraint_text(&lhs, c.op, &rhs);
        Some(Constraint {
            lhs,
            op: c.op,
            rhs,
            text,
        })
    }

    /// Resolve the names of a constraint (`tile_vars_only` = false) or a tiling condition.
    fn cexpr(&mut self, e: &CAst, tile_vars_only: bool) -> Option<CExpr> {
        match &e.kind {
            CAstKind::Number(v) => Some(CExpr::Number(*v)),
            CAstKind::Name(name) => self.cname(name, e.span, tile_vars_only),
            CAstKind::Neg(inner) => Some(CExpr::Neg(Box::new(self.cexpr(inner, tile_vars_only)?))),
            CAstKind::Not(inner) => Some(CExpr::Not(Box::new(self.cexpr(inner, tile_vars_only)?))),
            CAstKind::Bin(op, lhs, rhs) => {
                let lhs = self.cexpr(lhs, tile_vars_only);
                let rhs = self.cexpr(rhs, tile_vars_only);
                Some(CExpr::Bin(*op, Box::new(lhs?), Box::new(rhs?)))
            }
        }
    }

    fn cname(&mut self, name: &str, span: Span, tile_vars_only: bool) -> Option<CExpr> {
        if let Some(var) = TileVar::from_name(name) {
            self.check_implemented(var, span)?;
            return Some(CExpr::TileVar(var));
        }
        match name {
            "true" => return Some(CExpr::Number(1.0)),
            "false" => return Some(CExpr::Number(0.0)),
            _ => {}
        }
        let tile_vars = TileVar::ALL.map(TileVar::name);
        if tile_vars_only {
            let hint = did_you_mean(name, tile_vars).unwrap_or_else(|| {
                "`where` conditions narrow tile variables; put model limits in `constraints`"
                    .to_string()
            });
            let d = self.error(
                span,
                format!("`{name}` cannot be used in a tiling condition"),
            );
            d.expected = Some(format!("a tile variable: {}", tile_vars.join(", ")));
            d.hint = Some(hint);
            return None;
        }
        if let Some(obs) = Observable::from_name(name) {
            return Some(CExpr::Observable(obs));
        }
        if let Some(backend) = Backend::from_name(name) {
            return Some(CExpr::Backend(backend));
        }
        let observables = Observable::ALL.map(Observable::name);
        let known = observables
            .iter()
            .chain(&tile_vars)
            .copied()
            .chain(["alu_utilization"])
            .chain(Backend::ALL.map(Backend::name));
        let hint = match seed_observable(name) {
            Some(v1) => Some(format!("the observable is `{v1}`")),
            None => did_you_mean(name, known),
        };
        let d = self.error(span, format!("unknown name `{name}` in a constraint"));
        d.expected = Some(format!(
            "an observable ({}) or a tile variable ({})",
            observables.join(", "),
            tile_vars.join(", ")
        ));
        d.hint = hint;
        None
    }

    /// A tile variable no generator implements would be silently ignored (every plan has it at
    /// 1), so naming one is an error until a generator takes it.
    fn check_implemented(&mut self, var: TileVar, span: Span) -> Option<()> {
        if var != TileVar::SPLIT_K {
            return Some(());
        }
        self.error(
            span,
            "`SPLIT_K` is not implemented yet: no generator splits K, every plan has SPLIT_K = 1",
        )
        .hint = Some(
            "remove it; small-M shapes are planned without split-K (examples/decode.dgml)"
                .to_string(),
        );
        None
    }

    fn tiling(&mut self, entries: &[TilingEntry]) -> Vec<TilingDomain> {
        let mut seen: Vec<TileVar> = Vec::new();
        let mut out = Vec::new();
        for entry in entries {
            let var = TileVar::from_name(&entry.var.text);
            if var.is_none() {
                let names = TileVar::ALL.map(TileVar::name);
                let hint = did_you_mean(&entry.var.text, names);
                let d = self.error(
                    entry.var.span,
                    format!("unknown tile variable `{}`", entry.var.text),
                );
                d.expected = Some(format!("one of {}", names.join(", ")));
                d.hint = hint;
            }
            if let Some(v) = var {
                // Reported once; the entry is still checked for its own errors.
                let _ = self.check_implemented(v, entry.var.span);
                if seen.contains(&v) {
                    self.error(
                        entry.var.span,
                        format!("`{}` is given twice in `tiling`", v.name()),
                    );
                }
                seen.push(v);
            }
            let values = self.tile_values(entry);
            let condition = match &entry.condition {
                Some(c) => self.cexpr(c, true).map(Some),
                None => Some(None),
            };
            if let (Some(var), Some(values), Some(condition)) = (var, values, condition) {
                out.push(TilingDomain {
                    var,
                    values,
                    condition,
                });
            }
        }
        out
    }

    fn tile_values(&mut self, entry: &TilingEntry) -> Option<TileValues> {
        let var = &entry.var.text;
        let (lo, hi) = match &entry.values {
            TileValuesAst::Set(values) => {
                return self.int_set(values, entry.span, var).map(TileValues::Set)
            }
            TileValuesAst::Interval { lo, hi } | TileValuesAst::Stepped { lo, hi, .. } => {
                (*lo, *hi)
            }
        };
        if lo > hi {
            self.error(
                entry.span,
                format!("empty range: `{var}` from {lo} to {hi} has no values"),
            )
            .hint = Some("write the smaller bound first".to_string());
            return None;
        }
        if lo == 0 {
            self.error(entry.span, format!("`{var}` must be at least 1"));
            return None;
        }
        match entry.values {
            TileValuesAst::Stepped { step: 0, .. } => {
                self.error(entry.span, "`step` must be at least 1");
                None
            }
            TileValuesAst::Stepped { lo, hi, step } => Some(TileValues::Stepped { lo, hi, step }),
            TileValuesAst::Interval { lo, hi } => Some(TileValues::Interval { lo, hi }),
            TileValuesAst::Set(_) => None,
        }
    }
}

/// Which extents are fixed by the shape: a literal dim matches a symbol whose value is fixed
/// to that literal.
#[derive(Default)]
struct Fixed([Option<u64>; 3]);

impl Fixed {
    fn of(shape: &Option<ShapeSpec>) -> Fixed {
        let value = |d: &DimDomain| match d {
            DimDomain::Fixed(v) => Some(*v),
            _ => None,
        };
        match shape {
            Some(s) => Fixed([value(&s.m), value(&s.n), value(&s.k)]),
            None => Fixed::default(),
        }
    }

    fn matches(&self, dim: &Dim, sym: ShapeSym) -> bool {
        match dim {
            Dim::Sym(s) => *s == sym,
            Dim::Lit(v) => self.0[sym as usize] == Some(*v),
            Dim::CeilDiv(..) => false,
        }
    }
}

/// The default epilogue: `acc`, scaled by `alpha` when declared, plus `beta * C` (or `C`).
fn default_epilogue(operands: &[Operand], params: &[Param]) -> Expr {
    let has_param = |name: &str| params.iter().any(|p| p.name == name);
    let mut expr = Expr::Acc;
    if has_param("alpha") {
        expr = Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Var("alpha".into())),
            Box::new(expr),
        );
    }
    if let Some(c) = operands.iter().find(|o| o.role == Role::C) {
        let mut term = Expr::Var(c.name.clone());
        if has_param("beta") {
            term = Expr::Binary(
                BinaryOp::Mul,
                Box::new(Expr::Var("beta".into())),
                Box::new(term),
            );
        }
        expr = Expr::Binary(BinaryOp::Add, Box::new(expr), Box::new(term));
    }
    expr
}

fn shape_symbol(name: &str) -> Option<ShapeSym> {
    match name {
        "M" => Some(ShapeSym::M),
        "N" => Some(ShapeSym::N),
        "K" => Some(ShapeSym::K),
        _ => None,
    }
}

fn scale_granularity(of: &Role, dims: &[Dim]) -> Option<ScaleGranularity> {
    use ShapeSym::{K, M, N};
    match (of, dims) {
        (Role::A | Role::B, []) => Some(ScaleGranularity::PerTensor),
        (Role::A, [Dim::Sym(M)]) => Some(ScaleGranularity::PerRow),
        (Role::B, [Dim::Sym(N)]) => Some(ScaleGranularity::PerCol),
        (Role::A, [Dim::Sym(M), Dim::CeilDiv(K, 128)])
        | (Role::B, [Dim::Sym(N), Dim::CeilDiv(K, 128)]) => Some(ScaleGranularity::Block1x128),
        (Role::B, [Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)]) => {
            Some(ScaleGranularity::Block128x128)
        }
        _ => None,
    }
}

fn has_backend_literal(e: &CExpr) -> bool {
    match e {
        CExpr::Backend(_) => true,
        CExpr::Neg(x) | CExpr::Not(x) => has_backend_literal(x),
        CExpr::Bin(_, l, r) => has_backend_literal(l) || has_backend_literal(r),
        _ => false,
    }
}

fn role_name(role: &Role) -> &'static str {
    match role {
        Role::A => "A [M, K]",
        Role::B => "B [K, N]",
        Role::C => "C [M, N]",
        Role::D => "output D [M, N]",
        Role::RowVector => "row vector [M]",
        Role::ColVector => "column vector [N]",
        Role::Scalar => "scalar",
        Role::Scale { .. } => "scale",
        Role::Amax { .. } => "amax",
    }
}

/// A hint for dims that fit no role, aimed at the usual mistake: B written as [N, K].
fn role_hint(dims: &[Dim]) -> String {
    use ShapeSym::{K, M, N};
    match dims {
        [Dim::Sym(N), Dim::Sym(K)] => {
            "B is always [K, N]; a B stored as N rows of K is `[K, N] col`".to_string()
        }
        [Dim::Sym(K), Dim::Sym(M)] => {
            "A is always [M, K]; an A stored as K rows of M is `[M, K] col`".to_string()
        }
        [Dim::Sym(N), Dim::Sym(M)] => "C is [M, N]; a transposed C is `[M, N] col`".to_string(),
        [Dim::Sym(K)] => "vectors are [M] (one per row) or [N] (one per column)".to_string(),
        _ => "dims name M, N and K in the order of the role; `col` gives the other storage order"
            .to_string(),
    }
}

fn decl_span(decls: &[&OperandDecl], name: &str) -> Span {
    decls
        .iter()
        .find(|d| d.name.text == name)
        .map_or_else(Span::default, |d| d.dtype.span)
}
