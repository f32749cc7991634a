//! What an epilogue expression means, as a function on f64: the CPU reference evaluates it with
//! [`Expr::eval`] and code generation must agree with it.
//!
//! Functions:
//! - `relu(x)` = max(x, 0)
//! - `gelu(x)` = 0.5·x·(1 + erf(x/√2)) (the exact, erf form)
//! - `gelu_tanh(x)` = 0.5·x·(1 + tanh(0.79788456·(x + 0.044715·x³))) (the tanh approximation)
//! - `silu(x)` = x·sigmoid(x); `sigmoid(x)` = 1/(1 + e^(−x)); `tanh`, `abs` as usual
//! - `min(a, b)`, `max(a, b)`; `clamp(x, lo, hi)` = min(max(x, lo), hi)
//! - `cast<dt>(x)` rounds x to the nearest value of `dt` (ties to even): f16 and bf16 through
//!   the `half` crate, f32 through `as f32`, tf32 to 10 mantissa bits, e4m3/e5m2 to their 3/2
//!   mantissa bits saturating at ±448 / ±57344 (the `satfinite` conversion), i8/i32 to the
//!   nearest integer saturating at the type's range.

use super::types::{BinaryOp, Expr, Func, UnaryOp};
use crate::dtype::DType;

impl Expr {
    /// The value of the expression, with `acc` = `acc` and every other name looked up in `env`.
    pub fn eval(&self, env: &dyn Fn(&str) -> f64, acc: f64) -> f64 {
        match self {
            Expr::Acc => acc,
            Expr::Number(v) => *v,
            Expr::Var(name) => env(name),
            Expr::Unary(UnaryOp::Neg, x) => -x.eval(env, acc),
            Expr::Binary(op, l, r) => {
                let (l, r) = (l.eval(env, acc), r.eval(env, acc));
                match op {
                    BinaryOp::Add => l + r,
                    BinaryOp::Sub => l - r,
                    BinaryOp::Mul => l * r,
                    BinaryOp::Div => l / r,
                }
            }
            Expr::Call(func, args) => {
                let args: Vec<f64> = args.iter().map(|a| a.eval(env, acc)).collect();
                apply(*func, &args)
            }
            Expr::Cast(dtype, x) => round_to(*dtype, x.eval(env, acc)),
        }
    }

    /// The names the expression reads (params and inputs), each once, in first-use order.
    /// `acc` is not a name and is not listed.
    pub fn references(&self) -> Vec<String> {
        let mut names = Vec::new();
        self.collect_references(&mut names);
        names
    }

    fn collect_references(&self, names: &mut Vec<String>) {
        match self {
            Expr::Acc | Expr::Number(_) => {}
            Expr::Var(name) => {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            Expr::Unary(_, x) | Expr::Cast(_, x) => x.collect_references(names),
            Expr::Binary(_, l, r) => {
                l.collect_references(names);
                r.collect_references(names);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.collect_references(names)),
        }
    }
}

/// `sqrt(2/pi)`, as written in the gelu_tanh formula.
const GELU_TANH_SCALE: f64 = 0.79788456;
const GELU_TANH_CUBIC: f64 = 0.044715;

/// Apply a built-in function; semantic analysis guarantees `args.len() == func.arity()`.
fn apply(func: Func, args: &[f64]) -> f64 {
    let x = args.first().copied().unwrap_or(f64::NAN);
    let arg = |i: usize| args.get(i).copied().unwrap_or(f64::NAN);
    match func {
        Func::Relu => x.max(0.0),
        Func::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        Func::GeluTanh => {
            0.5 * x * (1.0 + (GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x * x * x)).tanh())
        }
        Func::Silu => x * sigmoid(x),
        Func::Sigmoid => sigmoid(x),
        Func::Tanh => x.tanh(),
        Func::Min => x.min(arg(1)),
        Func::Max => x.max(arg(1)),
        Func::Clamp => x.max(arg(1)).min(arg(2)),
        Func::Abs => x.abs(),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// erf(x) to about 1e-15, from the everywhere-convergent series of positive terms
/// erf(x) = 2/√π · e^(−x²) · Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1)); |erf(x)| rounds to 1 past 6.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax >= 6.0 {
        return x.signum();
    }
    let x2 = ax * ax;
    let (mut term, mut sum) = (ax, ax);
    for n in 1..1000 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    let value = 2.0 / std::f64::consts::PI.sqrt() * (-x2).exp() * sum;
    value.min(1.0).copysign(x)
}

/// Round `x` to the nearest value representable in `dtype` (see the module docs).
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => x as f32 as f64,
        DType::F16 => half::f16::from_f64(x).to_f64(),
        DType::Bf16 => half::bf16::from_f64(x).to_f64(),
        // tf32 keeps f32's exponent range: round the f32 value to 10 mantissa bits.
        DType::Tf32 => round_float(x as f32 as f64, 10, -126, f32::MAX as f64),
        DType::E4m3 => round_float(x, 3, -6, 448.0),
        DType::E5m2 => round_float(x, 2, -14, 57344.0),
        DType::I8 => round_int(x, i8::MIN as f64, i8::MAX as f64),
        DType::I32 => round_int(x, i32::MIN as f64, i32::MAX as f64),
    }
}

/// Round to a binary float with `mantissa_bits` explicit bits, normal exponents from
/// `min_exp` (subnormals below) and largest finite value `max`, saturating; ties to even.
fn round_float(x: f64, mantissa_bits: i32, min_exp: i32, max: f64) -> f64 {
    if !x.is_finite() {
        return if x.is_nan() { x } else { max.copysign(x) };
    }
    if x == 0.0 {
        return x;
    }
    // The binary exponent, read exactly from the bits (f64 subnormals are far below min_exp).
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    let exp = (biased - 1023).max(min_exp);
    let quantum = 2f64.powi(exp - mantissa_bits);
    let rounded = (x / quantum).round_ties_even() * quantum;
    rounded.clamp(-max, max)
}

fn round_int(x: f64, min: f64, max: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    x.round_ties_even().clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(e: &Expr, acc: f64) -> f64 {
        e.eval(&|name| if name == "alpha" { 2.0 } else { 10.0 }, acc)
    }

    fn call(f: Func, args: Vec<Expr>) -> Expr {
        Expr::Call(f, args)
    }

    #[test]
    fn erf_matches_known_values() {
        // Reference values of erf (Abramowitz & Stegun, table 7.1).
        for (x, want) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.5, 0.999_999_256_901_627_7),
        ] {
            assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-14);
        }
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(7.0), 1.0);
    }

    #[test]
    fn activations() {
        let gelu = call(Func::Gelu, vec![Expr::Acc]);
        assert!((eval(&gelu, 1.0) - 0.841_344_746_068_542_9).abs() < 1e-12);
        let gelu_tanh = call(Func::GeluTanh, vec![Expr::Acc]);
        assert!((eval(&gelu_tanh, 1.0) - 0.841_191_990_607_477_4).abs() < 1e-7);
        let silu = call(Func::Silu, vec![Expr::Acc]);
        assert!((eval(&silu, 2.0) - 1.761_594_155_955_764_9).abs() < 1e-12);
        assert_eq!(eval(&call(Func::Relu, vec![Expr::Acc]), -3.0), 0.0);
        let clamp = call(
            Func::Clamp,
            vec![Expr::Acc, Expr::Number(-1.0), Expr::Number(1.0)],
        );
        assert_eq!(eval(&clamp, 5.0), 1.0);
        assert_eq!(eval(&clamp, -5.0), -1.0);
    }

    #[test]
    fn variables_and_arithmetic() {
        // alpha * acc + bias, alpha = 2, bias = 10
        let e = Expr::Binary(
            BinaryOp::Add,
            Box::new(Expr::Binary(
                BinaryOp::Mul,
                Box::new(Expr::Var("alpha".into())),
                Box::new(Expr::Acc),
            )),
            Box::new(Expr::Var("bias".into())),
        );
        assert_eq!(eval(&e, 3.0), 16.0);
        assert_eq!(
            e.references(),
            vec!["alpha".to_string(), "bias".to_string()]
        );
    }

    #[test]
    fn casts_round_to_the_type() {
        assert_eq!(round_to(DType::Bf16, 1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(round_to(DType::F16, 65519.0), 65504.0);
        assert_eq!(round_to(DType::E4m3, 1000.0), 448.0);
        assert_eq!(round_to(DType::E4m3, 1.0625), 1.0); // tie between 1.0 and 1.125 → even
        assert_eq!(round_to(DType::E4m3, 1.07), 1.125);
        assert_eq!(round_to(DType::E4m3, 2f64.powi(-9)), 2f64.powi(-9)); // smallest subnormal
        assert_eq!(round_to(DType::E5m2, 1e6), 57344.0);
        assert_eq!(round_to(DType::Tf32, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            round_to(DType::Tf32, 1.0 + 2f64.powi(-10)),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(round_to(DType::I8, 300.0), 127.0);
        assert_eq!(round_to(DType::I8, 2.5), 2.0);
        assert_eq!(round_to(DType::I32, -1e12), i32::MIN as f64);
    }
}
