//! Constraint and tiling-condition evaluation over a plan and its prediction: type checking,
//! evaluation, soft-constraint distance and the detection of constraints that contradict each
//! other before any plan is looked at.

use crate::model::{ObservableValue, Observables};
use crate::plan::{Backend, Plan};
use crate::spec::{CBinOp, CExpr, Constraint, ConstraintOp, TileValues, TileVar, TilingDomain};

/// A value of a constraint expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Number(f64),
    Backend(Backend),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Number,
    Backend,
    Bool,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Number => "a number",
            Type::Backend => "a backend",
            Type::Bool => "a condition",
        }
    }
}

/// Relative tolerance of comparisons, so that `tflops >= 700` is not decided by rounding.
const TOLERANCE: f64 = 1e-9;

/// The value of a tile variable in a plan.
pub fn tile_var(plan: &Plan, var: TileVar) -> f64 {
    let v = match var {
        TileVar::TILE_M => plan.tile.m,
        TileVar::TILE_N => plan.tile.n,
        TileVar::TILE_K => plan.tile.k,
        TileVar::STAGES => plan.stages,
        TileVar::CLUSTER_M => plan.cluster_m,
        TileVar::CLUSTER_N => plan.cluster_n,
        // Consumer warpgroups of a Hopper plan; warps / 4 for the others.
        TileVar::WARPGROUPS => crate::backend::of(plan.backend).warpgroups(plan),
        TileVar::SPLIT_K => plan.split_k,
    };
    v as f64
}

/// What an expression is evaluated against: a plan, and its prediction when there is one.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub plan: &'a Plan,
    pub observables: Option<&'a Observables>,
}

/// Checks that `constraint` compares things that can be compared; the message says what is wrong.
pub fn check_constraint(c: &Constraint) -> Result<(), String> {
    let (l, r) = (type_of(&c.lhs)?, type_of(&c.rhs)?);
    let ok = match c.op {
        ConstraintOp::Le | ConstraintOp::Ge => l == Type::Number && r == Type::Number,
        ConstraintOp::Eq | ConstraintOp::Near => l == r && l != Type::Bool,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` compares {} with {} using `{}`; `backend` compares only with `==` or `~` against sm90, sm80 or simt, and numbers with numbers",
            c.text,
            l.name(),
            r.name(),
            c.op.symbol()
        ))
    }
}

/// Checks that a `where` clause is a condition.
pub fn check_condition(expr: &CExpr) -> Result<(), String> {
    match type_of(expr)? {
        Type::Bool => Ok(()),
        other => Err(format!(
            "`where {}` is {}, not a condition",
            expr,
            other.name()
        )),
    }
}

fn type_of(expr: &CExpr) -> Result<Type, String> {
    use crate::spec::Observable;
    Ok(match expr {
        CExpr::Number(_) | CExpr::TileVar(_) => Type::Number,
        CExpr::Observable(Observable::Backend) | CExpr::Backend(_) => Type::Backend,
        CExpr::Observable(_) => Type::Number,
        CExpr::Neg(e) => expect(e, Type::Number, "`-`")?,
        CExpr::Not(e) => expect(e, Type::Bool, "`!`")?,
        CExpr::Bin(op, l, r) => {
            let (lt, rt) = (type_of(l)?, type_of(r)?);
            let bad = || {
                format!(
                    "`{}` applies `{}` to {} and {}",
                    expr,
                    op.symbol(),
                    lt.name(),
                    rt.name()
                )
            };
            match op {
                CBinOp::Add | CBinOp::Sub | CBinOp::Mul | CBinOp::Div | CBinOp::Mod => {
                    if lt != Type::Number || rt != Type::Number {
                        return Err(bad());
                    }
                    Type::Number
                }
                CBinOp::Lt | CBinOp::Le | CBinOp::Gt | CBinOp::Ge => {
                    if lt != Type::Number || rt != Type::Number {
                        return Err(bad());
                    }
                    Type::Bool
                }
                CBinOp::Eq | CBinOp::Ne => {
                    if lt != rt {
                        return Err(bad());
                    }
                    Type::Bool
                }
                CBinOp::And | CBinOp::Or => {
                    if lt != Type::Bool || rt != Type::Bool {
                        return Err(bad());
                    }
                    Type::Bool
                }
            }
        }
    })
}

fn expect(e: &CExpr, want: Type, what: &str) -> Result<Type, String> {
    let got = type_of(e)?;
    if got == want {
        Ok(want)
    } else {
        Err(format!(
            "{what} needs {} but `{}` is {}",
            want.name(),
            e,
            got.name()
        ))
    }
}

/// Evaluates a type-checked expression. `None` when it names an observable and `env` has no
/// prediction, or names anything and there is no plan (see [`constant`]).
pub fn eval(expr: &CExpr, env: Option<Env<'_>>) -> Option<Value> {
    Some(match expr {
        CExpr::Number(x) => Value::Number(*x),
        CExpr::Backend(b) => Value::Backend(*b),
        CExpr::TileVar(v) => Value::Number(tile_var(env?.plan, *v)),
        CExpr::Observable(o) => match env?.observables?.get(*o) {
            ObservableValue::Number(x) => Value::Number(x),
            ObservableValue::Backend(b) => Value::Backend(b),
        },
        CExpr::Neg(e) => Value::Number(-number(eval(e, env)?)?),
        CExpr::Not(e) => Value::Bool(!boolean(eval(e, env)?)?),
        CExpr::Bin(op, l, r) => {
            let (l, r) = (eval(l, env)?, eval(r, env)?);
            match op {
                CBinOp::Add => Value::Number(number(l)? + number(r)?),
                CBinOp::Sub => Value::Number(number(l)? - number(r)?),
                CBinOp::Mul => Value::Number(number(l)? * number(r)?),
                CBinOp::Div => Value::Number(number(l)? / number(r)?),
                CBinOp::Mod => Value::Number(number(l)? % number(r)?),
                CBinOp::Lt => Value::Bool(number(l)? < number(r)?),
                CBinOp::Le => Value::Bool(number(l)? <= number(r)?),
                CBinOp::Gt => Value::Bool(number(l)? > number(r)?),
                CBinOp::Ge => Value::Bool(number(l)? >= number(r)?),
                CBinOp::Eq => Value::Bool(l == r),
                CBinOp::Ne => Value::Bool(l != r),
                CBinOp::And => Value::Bool(boolean(l)? && boolean(r)?),
                CBinOp::Or => Value::Bool(boolean(l)? || boolean(r)?),
            }
        }
    })
}

/// The value of an expression that names no plan property, e.g. `200 * 1024`.
pub fn constant(expr: &CExpr) -> Option<Value> {
    eval(expr, None)
}

fn number(v: Value) -> Option<f64> {
    match v {
        Value::Number(x) => Some(x),
        _ => None,
    }
}

fn boolean(v: Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

/// How a plan stands against one constraint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    pub lhs: Value,
    pub rhs: Value,
    /// Hard constraints: whether it holds. Soft ones always hold.
    pub holds: bool,
    /// Soft constraints: relative distance from the target (0 = on it).
    pub distance: f64,
}

pub fn stand(c: &Constraint, env: Env<'_>) -> Option<Standing> {
    let lhs = eval(&c.lhs, Some(env))?;
    let rhs = eval(&c.rhs, Some(env))?;
    let (holds, distance) = match (c.op, lhs, rhs) {
        (ConstraintOp::Le, Value::Number(l), Value::Number(r)) => (l <= r + slack(r), 0.0),
        (ConstraintOp::Ge, Value::Number(l), Value::Number(r)) => (l + slack(r) >= r, 0.0),
        (ConstraintOp::Eq, Value::Number(l), Value::Number(r)) => ((l - r).abs() <= slack(r), 0.0),
        (ConstraintOp::Eq, l, r) => (l == r, 0.0),
        (ConstraintOp::Near, Value::Number(l), Value::Number(r)) => {
            (true, (l - r).abs() / r.abs().max(1.0))
        }
        (ConstraintOp::Near, l, r) => (true, if l == r { 0.0 } else { 1.0 }),
        _ => return None,
    };
    Some(Standing {
        lhs,
        rhs,
        holds,
        distance,
    })
}

fn slack(r: f64) -> f64 {
    TOLERANCE * r.abs().max(1.0)
}

/// Whether a plan lies in a tiling domain (its value is allowed and the `where` clause holds).
pub fn in_domain(domain: &TilingDomain, plan: &Plan) -> bool {
    let v = tile_var(plan, domain.var);
    let allowed = match &domain.values {
        TileValues::Interval { lo, hi } => (*lo as f64..=*hi as f64).contains(&v),
        TileValues::Set(values) => values.iter().any(|&x| x as f64 == v),
        TileValues::Stepped { lo, hi, step } => {
            (*lo as f64..=*hi as f64).contains(&v)
                && (v - *lo as f64) % (*step).max(1) as f64 == 0.0
        }
    };
    let env = Env {
        plan,
        observables: None,
    };
    allowed
        && domain
            .condition
            .as_ref()
            .is_none_or(|c| eval(c, Some(env)) == Some(Value::Bool(true)))
}

/// Two hard constraints that no plan can satisfy together, e.g. `smem <= 10 KiB` and
/// `smem >= 20 KiB`, or `TILE_M == 64` and `TILE_M == 128`: (first text, second text, why).
pub fn find_contradiction(constraints: &[Constraint]) -> Option<(String, String, String)> {
    // Each hard constraint with one constant side bounds its other side to an interval (numbers)
    // or a value (backends).
    struct Bound<'a> {
        key: &'a CExpr,
        lo: f64,
        hi: f64,
        backend: Option<Backend>,
        text: &'a str,
    }
    let mut bounds: Vec<Bound> = Vec::new();
    for c in constraints.iter().filter(|c| c.op != ConstraintOp::Near) {
        let (key, op, value) = match (constant(&c.lhs), constant(&c.rhs)) {
            (None, Some(v)) => (&c.lhs, c.op, v),
            (Some(v), None) => (&c.rhs, flip(c.op), v),
            _ => continue,
        };
        let (lo, hi, backend) = match (op, value) {
            (ConstraintOp::Le, Value::Number(x)) => (f64::NEG_INFINITY, x, None),
            (ConstraintOp::Ge, Value::Number(x)) => (x, f64::INFINITY, None),
            (ConstraintOp::Eq, Value::Number(x)) => (x, x, None),
            (ConstraintOp::Eq, Value::Backend(b)) => (0.0, 0.0, Some(b)),
            _ => continue,
        };
        bounds.push(Bound {
            key,
            lo,
            hi,
            backend,
            text: &c.text,
        });
    }
    for (i, a) in bounds.iter().enumerate() {
        for b in &bounds[i + 1..] {
            if a.key != b.key {
                continue;
            }
            let what = a.key;
            let why = match (a.backend, b.backend) {
                (Some(x), Some(y)) if x != y => {
                    format!("`{what}` cannot be both {x} and {y}")
                }
                (None, None) if a.lo.max(b.lo) > a.hi.min(b.hi) + slack(a.hi.min(b.hi)) => {
                    format!(
                        "`{what}` would have to be {} and {} at once",
                        describe(a.lo, a.hi),
                        describe(b.lo, b.hi)
                    )
                }
                _ => continue,
            };
            return Some((a.text.to_string(), b.text.to_string(), why));
        }
    }
    None
}

fn flip(op: ConstraintOp) -> ConstraintOp {
    match op {
        ConstraintOp::Le => ConstraintOp::Ge,
        ConstraintOp::Ge => ConstraintOp::Le,
        other => other,
    }
}

fn describe(lo: f64, hi: f64) -> String {
    if lo == hi {
        format!("= {}", fmt_number(lo))
    } else if lo == f64::NEG_INFINITY {
        format!("<= {}", fmt_number(hi))
    } else if hi == f64::INFINITY {
        format!(">= {}", fmt_number(lo))
    } else {
        format!("in [{}, {}]", fmt_number(lo), fmt_number(hi))
    }
}

/// A number as people write it: integers without a fraction, others with 3 significant digits.
pub fn fmt_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// A value as a message shows it.
pub fn fmt_value(v: Value) -> String {
    match v {
        Value::Number(x) => fmt_number(x),
        Value::Backend(b) => b.name().to_string(),
        Value::Bool(b) => b.to_string(),
    }
}
