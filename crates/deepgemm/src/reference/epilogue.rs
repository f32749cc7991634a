//! The spec's epilogue on the CPU, each name it reads resolved to its value's source.

use super::*;

/// The epilogue with every name it reads resolved to where its value comes from; the expression
/// itself is evaluated by [`Expr::eval`], the one definition of what it means.
pub(super) struct CompiledEpilogue<'a> {
    pub(super) expr: &'a Expr,
    pub(super) names: Vec<(String, Source<'a>)>,
}

pub(super) enum Source<'a> {
    /// A param or a scalar input.
    Constant(f64),
    /// A vector along N (one value per column) or M (one per row).
    PerCol(&'a HostTensor),
    PerRow(&'a HostTensor),
    Matrix(&'a HostTensor),
}

impl<'a> CompiledEpilogue<'a> {
    pub(super) fn new(spec: &'a KernelSpec, problem: &'a Problem) -> Result<Self, ReferenceError> {
        let expr = &spec.epilogue.expr;
        let names = expr
            .references()
            .into_iter()
            .map(|name| {
                let source = source(&name, problem)?;
                Ok((name, source))
            })
            .collect::<Result<_, _>>()?;
        Ok(CompiledEpilogue { expr, names })
    }

    pub(super) fn eval(&self, r: u64, c: u64, acc: f64) -> f64 {
        let value = |name: &str| match self.names.iter().find(|(n, _)| n == name) {
            Some((_, Source::Constant(v))) => *v,
            Some((_, Source::PerCol(t))) => t.element(0, c),
            Some((_, Source::PerRow(t))) => t.element(0, r),
            Some((_, Source::Matrix(t))) => t.element(r, c),
            // `new` resolved every name the expression references.
            None => f64::NAN,
        };
        self.expr.eval(&value, acc)
    }
}

pub(super) fn source<'a>(name: &str, problem: &'a Problem) -> Result<Source<'a>, ReferenceError> {
    if let Some((_, v)) = problem.params.iter().find(|(p, _)| p == name) {
        return Ok(Source::Constant(*v));
    }
    let tensor = problem
        .tensor(name)
        .ok_or_else(|| ReferenceError::UnknownVariable { name: name.into() })?;
    Ok(match tensor.role {
        Role::Scalar => Source::Constant(tensor.element(0, 0)),
        Role::ColVector => Source::PerCol(tensor),
        Role::RowVector => Source::PerRow(tensor),
        Role::C => Source::Matrix(tensor),
        ref role => {
            return Err(ReferenceError::UnreadableVariable {
                name: name.into(),
                role: format!("{role:?}"),
            })
        }
    })
}
