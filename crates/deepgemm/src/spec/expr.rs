//! What an epilogue expression means, as a function on f64: the one definition, which the CPU
//! reference evaluates ([`Expr::eval`]) and code generation must agree with. A kernel evaluates
//! the same expression in f32 with the prelude's functions (`kernels/prelude.cuh`); the
//! reference keeps f64 for everything but `cast`, which rounds exactly as the kernel does.
//!
//! Functions:
//! - `relu(x)` = max(x, 0)
//! - `gelu(x)` = 0.5·x·(1 + erf(x/√2)) (the exact, erf form)
//! - `gelu_tanh(x)` = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (the tanh approximation)
//! - `silu(x)` = x·sigmoid(x); `sigmoid(x)` = 1/(1 + e^(−x)); `tanh`, `abs` as usual
//! - `min(a, b)`, `max(a, b)` (a NaN argument is ignored, like `fminf`/`fmaxf`);
//!   `clamp(x, lo, hi)` = min(max(x, lo), hi)
//! - `cast<dt>(x)` rounds the f32 nearest x to `dt` as the kernel does: [`round_to`] (ties to
//!   even for f16, bf16, e4m3, e5m2, i8 and i32, away from zero for tf32; FP8 saturates to its
//!   largest finite value, i8 and i32 to their range).

use super::types::{BinaryOp, Expr, Func, UnaryOp};
use crate::codec::round_to;

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

/// √(2/π), the constant the prelude's `dg_gelu_tanh` writes out.
const GELU_TANH_SCALE: f64 = 0.797_884_560_802_865_4;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

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
            (3.0, 0.999_977_909_503_001_4),
            (3.5, 0.999_999_256_901_627_7),
            (-1.5, -0.966_105_146_475_310_7),
        ] {
            assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
            assert!((erf(-x) - -want).abs() < 1e-14);
        }
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(7.0), 1.0);
    }

    #[test]
    fn activations() {
        let gelu = call(Func::Gelu, vec![Expr::Acc]);
        assert!((eval(&gelu, 1.0) - 0.841_344_746_068_542_9).abs() < 1e-12);
        let gelu_tanh = call(Func::GeluTanh, vec![Expr::Acc]);
        // PyTorch's gelu(1.0, approximate="tanh").
        assert!((eval(&gelu_tanh, 1.0) - 0.841_191_990_608_276_8).abs() < 1e-15);
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
    fn casts_round_as_the_kernel_does() {
        let cast = |dtype, e: Expr| Expr::Cast(dtype, Box::new(e));
        let half_acc = Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Acc),
            Box::new(Expr::Number(0.5)),
        );
        // 5 * 0.5 = 2.5 is a tie: rintf gives the even 2, not 3.
        assert_eq!(eval(&cast(DType::I8, half_acc.clone()), 5.0), 2.0);
        assert_eq!(eval(&cast(DType::I8, half_acc), -7.0), -4.0);
        // 1 + 2^-8 lies halfway between the bf16 values 1 and 1 + 2^-7.
        let tie = 1.0 + 2f64.powi(-8);
        assert_eq!(eval(&cast(DType::Bf16, Expr::Acc), tie), 1.0);
        // A cast of a cast rounds twice, as the kernel does: 1 + 2^-8 + 2^-12 is above the tie
        // and rounds to the bf16 1 + 2^-7, but through f16 it first becomes the tie 1 + 2^-8.
        let nested = cast(DType::Bf16, cast(DType::F16, Expr::Acc));
        assert_eq!(eval(&nested, tie + 2f64.powi(-12)), 1.0);
        assert_eq!(
            eval(&cast(DType::Bf16, Expr::Acc), tie + 2f64.powi(-12)),
            1.0 + 2f64.powi(-7)
        );
    }
}
