//! Goodness of fit to a fully specified distribution ("case 0": no parameter
//! estimated from the data), after the probability integral transform: if `X`
//! has the continuous distribution function `F`, then `F(X)` is uniform on
//! `(0, 1)`, so every such test is a test of uniformity of the transformed
//! values.
//!
//! - The Anderson–Darling statistic `A²` (T. W. Anderson, D. A. Darling,
//!   "A test of goodness of fit", JASA 49, 1954; NIST/SEMATECH e-Handbook of
//!   Statistical Methods §1.3.5.14) weighs the tails, where a generator's
//!   failures (bursts: too many short gaps; stalls: too many long ones) show.
//!   Its p-value is G. Marsaglia and J. Marsaglia's, "Evaluating the
//!   Anderson–Darling distribution", Journal of Statistical Software 9(2),
//!   2004: their short-cut `adinf` for the limiting distribution plus their
//!   `errfix` correction for finite `n`, as in the paper's `AD(n, z)`.
//!   Against the exact limiting distribution (their series, and Imhof's
//!   inversion of `Σ Zⱼ²/(j(j + 1))`, which agree to 10 digits) `adinf` is
//!   within 2·10⁻⁵ (the paper's comment says 2·10⁻⁶; the largest error, near
//!   `z = 1`, is where p ≈ 0.36, far from any decision).
//! - The Kolmogorov–Smirnov statistic `D` (NIST e-Handbook §1.3.5.16), the
//!   largest distance between the empirical and the specified distribution
//!   functions, as a second opinion. Its p-value is Kolmogorov's limiting
//!   distribution evaluated at Stephens' modified statistic
//!   `(√n + 0.12 + 0.11/√n)·D` (M. A. Stephens, "Use of the
//!   Kolmogorov–Smirnov, Cramér–Von Mises and related statistics without
//!   extensive tables", JRSS B 32, 1970; the form of W. H. Press et al.,
//!   *Numerical Recipes*, 3rd ed., §14.3.3). Not the exact distribution of
//!   Marsaglia, Tsang and Wang (J. Stat. Software 8(18), 2003): that needs
//!   powers of matrices of order about `2nD` and scaling against underflow,
//!   while the tests here run on a few thousand values, where Stephens' form
//!   is within 5·10⁻⁴ of the exact p-value (and within 2·10⁻³ from `n` = 20):
//!   far below what moves a decision at a 1 % level.
//!
//! Both functions take values already transformed to `(0, 1)`, in any order;
//! 0 and 1 themselves are refused (their logarithm is infinite): a value the
//! specified distribution calls impossible is a failure of fit the caller
//! knows of before any test.

/// Anderson and Darling's limiting distribution below `z = 2`, Marsaglia and
/// Marsaglia's `adinf`: `exp(−C/z)/√z × poly(z)`, this `C` and the
/// coefficients of `poly` from lowest to highest degree.
const ADINF_LOW_EXPONENT: f64 = 1.233_714_1;
const ADINF_LOW_POLY: [f64; 6] = [
    2.000_12,
    0.247_105,
    -0.064_982_1,
    0.034_796_2,
    -0.011_672,
    0.001_686_91,
];
/// `adinf` from `z = 2` on: `exp(−exp(poly(z)))`, coefficients from lowest
/// to highest degree.
const ADINF_HIGH_POLY: [f64; 6] = [
    1.0776,
    -2.306_95,
    0.434_24,
    -0.082_433,
    0.008_056,
    -0.000_314_6,
];
/// Where `adinf` changes form.
const ADINF_SPLIT: f64 = 2.0;
/// Marsaglia and Marsaglia's `errfix`: above this value of `adinf` the
/// correction is `g3(x)/n`.
const ERRFIX_HIGH: f64 = 0.8;
/// `errfix`'s boundary between its first two pieces is `c = C0 + C1/n`.
const ERRFIX_C0: f64 = 0.012_65;
const ERRFIX_C1: f64 = 0.1757;
/// `errfix`'s `g2` (the middle piece), lowest degree first.
const ERRFIX_G2_POLY: [f64; 6] = [-0.000_226_33, 6.540_34, -14.6538, 14.458, -8.259, 1.918_64];
/// `errfix`'s `g3` (the upper piece), lowest degree first.
const ERRFIX_G3_POLY: [f64; 6] = [
    -130.2137, 745.2337, -1705.091, 1950.646, -1116.360, 255.7844,
];

/// Stephens' modification of the Kolmogorov–Smirnov statistic for `n`
/// values: `(√n + STEPHENS_A + STEPHENS_B/√n)·D` follows Kolmogorov's
/// limiting distribution closely from small `n` on.
const STEPHENS_A: f64 = 0.12;
const STEPHENS_B: f64 = 0.11;
/// Below this argument Kolmogorov's distribution is summed in its Jacobi
/// theta form, which converges fast there; above it in the alternating series
/// (the split of *Numerical Recipes*, 3rd ed., §6.14.12).
const KOLMOGOROV_SPLIT: f64 = 1.18;
/// At most this many terms of either series (both converge in a handful).
const SERIES_TERMS: u32 = 100;

/// The Anderson–Darling statistic of `uniforms`, values in `(0, 1)` that are
/// uniform if the hypothesised distribution is right:
///
/// ```text
/// A² = −n − (1/n) Σᵢ (2i − 1) [ln u₍ᵢ₎ + ln(1 − u₍ₙ₊₁₋ᵢ₎)],   u₍₁₎ ≤ … ≤ u₍ₙ₎
/// ```
///
/// `None` when `uniforms` is empty or holds a value outside the open interval
/// `(0, 1)` (or a NaN).
pub fn anderson_darling(uniforms: &[f64]) -> Option<f64> {
    if uniforms.is_empty() || !uniforms.iter().all(|&u| u > 0.0 && u < 1.0) {
        return None;
    }
    let mut sorted = uniforms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let logs: Vec<(f64, f64)> = sorted.iter().map(|&u| (u.ln(), (-u).ln_1p())).collect();
    anderson_darling_of_logs(&logs)
}

/// The Anderson–Darling statistic from `(ln u, ln(1 − u))` of values sorted
/// by `u`: the caller may know both logarithms more accurately than `u`
/// itself (a far tail, where `1 − u` rounds to 0). The sum is regrouped by
/// value, `Σᵢ (2i − 1) ln u₍ᵢ₎ + (2n + 1 − 2i) ln(1 − u₍ᵢ₎)`. `None` when
/// empty or when a logarithm is not finite and negative (or zero).
pub(crate) fn anderson_darling_of_logs(sorted_logs: &[(f64, f64)]) -> Option<f64> {
    if sorted_logs.is_empty()
        || !sorted_logs
            .iter()
            .all(|&(a, b)| a.is_finite() && b.is_finite() && a <= 0.0 && b <= 0.0)
    {
        return None;
    }
    let n = sorted_logs.len() as f64;
    let sum: f64 = sorted_logs
        .iter()
        .enumerate()
        .map(|(i, &(ln_u, ln_1mu))| {
            let i = (i + 1) as f64;
            (2.0 * i - 1.0) * ln_u + (2.0 * n + 1.0 - 2.0 * i) * ln_1mu
        })
        .sum();
    let a2 = -n - sum / n;
    a2.is_finite().then_some(a2.max(0.0))
}

/// The p-value of an Anderson–Darling statistic `a2` from `n` values, case 0:
/// `P(A² ≥ a2)` were the values uniform, `1 − AD(n, a2)` with `AD(n, z) =
/// adinf(z) + errfix(n, adinf(z))` (Marsaglia and Marsaglia 2004). The
/// asymptotic upper points 1.933, 2.492 and 3.857 (Anderson and Darling 1954)
/// have p-values 0.10, 0.05 and 0.01.
///
/// Far in the tail the correction does not vanish: `errfix(n, 1) = −0.0006/n`,
/// so p-values do not fall below about `6·10⁻⁴/n` (2·10⁻⁷ for 3000 values).
/// Any p-value that small is a rejection at every usual level.
///
/// `None` when `n` is 0 or `a2` is negative or not finite.
pub fn anderson_darling_p_value(a2: f64, n: usize) -> Option<f64> {
    if n == 0 || !a2.is_finite() || a2 < 0.0 {
        return None;
    }
    let n = n as f64;
    // The upper tail computed as such where it is small, so that tiny
    // p-values keep their digits.
    let (x, tail) = if a2 < ADINF_SPLIT {
        let x = if a2 == 0.0 {
            0.0
        } else {
            (-ADINF_LOW_EXPONENT / a2).exp() / a2.sqrt() * polynomial(&ADINF_LOW_POLY, a2)
        };
        (x, 1.0 - x)
    } else {
        let inner = polynomial(&ADINF_HIGH_POLY, a2).exp();
        ((-inner).exp(), -(-inner).exp_m1())
    };
    let p = tail - errfix(n, x);
    Some(p.clamp(0.0, 1.0))
}

/// Marsaglia and Marsaglia's `errfix(n, x)`: what to add to `x = adinf(z)`
/// to get the distribution function of `A²` for `n` values.
fn errfix(n: f64, x: f64) -> f64 {
    if x > ERRFIX_HIGH {
        return polynomial(&ERRFIX_G3_POLY, x) / n;
    }
    let c = ERRFIX_C0 + ERRFIX_C1 / n;
    if x < c {
        let t = x / c;
        let g1 = t.sqrt() * (1.0 - t) * (49.0 * t - 102.0);
        return g1 * (0.0037 / (n * n) + 0.00078 / n + 0.00006) / n;
    }
    let t = (x - c) / (ERRFIX_HIGH - c);
    polynomial(&ERRFIX_G2_POLY, t) * (0.04213 + 0.01365 / n) / n
}

/// The Kolmogorov–Smirnov statistic of `uniforms`, values in `(0, 1)`:
/// `D = max(D⁺, D⁻)`, `D⁺ = maxᵢ (i/n − u₍ᵢ₎)`, `D⁻ = maxᵢ (u₍ᵢ₎ − (i − 1)/n)`.
///
/// `None` when `uniforms` is empty or holds a value outside `(0, 1)`.
pub fn kolmogorov_smirnov(uniforms: &[f64]) -> Option<f64> {
    if uniforms.is_empty() || !uniforms.iter().all(|&u| u > 0.0 && u < 1.0) {
        return None;
    }
    let mut sorted = uniforms.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(kolmogorov_smirnov_of_sorted(&sorted))
}

/// `D` of sorted values in `(0, 1)`.
pub(crate) fn kolmogorov_smirnov_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            let i = i as f64;
            ((i + 1.0) / n - u).max(u - i / n)
        })
        .fold(0.0, f64::max)
}

/// The p-value of a Kolmogorov–Smirnov statistic `d` from `n` values, case 0:
/// `P(D ≥ d)` were the values uniform, as `Q_KS((√n + 0.12 + 0.11/√n)·d)`
/// with Kolmogorov's `Q_KS(λ) = 2 Σⱼ (−1)ʲ⁻¹ exp(−2j²λ²)` (Stephens 1970; see
/// the module's documentation for why not the exact distribution).
///
/// `None` when `n` is 0 or `d` is not in `[0, 1]`.
pub fn kolmogorov_smirnov_p_value(d: f64, n: usize) -> Option<f64> {
    if n == 0 || !(0.0..=1.0).contains(&d) {
        return None;
    }
    let root = (n as f64).sqrt();
    Some(kolmogorov_survival(
        (root + STEPHENS_A + STEPHENS_B / root) * d,
    ))
}

/// `P(K > λ)` for Kolmogorov's limiting distribution
/// `P(K ≤ λ) = 1 − 2 Σⱼ (−1)ʲ⁻¹ exp(−2j²λ²) = (√(2π)/λ) Σⱼ exp(−(2j − 1)²π²/(8λ²))`.
fn kolmogorov_survival(lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    let q = if lambda < KOLMOGOROV_SPLIT {
        let w = -std::f64::consts::PI.powi(2) / (8.0 * lambda * lambda);
        let mut sum = 0.0;
        for j in 1..=SERIES_TERMS {
            let odd = f64::from(2 * j - 1);
            let term = (odd * odd * w).exp();
            sum += term;
            if term <= f64::EPSILON * sum {
                break;
            }
        }
        1.0 - (2.0 * std::f64::consts::PI).sqrt() / lambda * sum
    } else {
        let mut sum = 0.0;
        let mut sign = 1.0;
        for j in 1..=SERIES_TERMS {
            let j = f64::from(j);
            let term = (-2.0 * j * j * lambda * lambda).exp();
            sum += sign * term;
            if term <= f64::EPSILON * sum.abs() {
                break;
            }
            sign = -sign;
        }
        2.0 * sum
    };
    q.clamp(0.0, 1.0)
}

/// `Σ cᵢ xⁱ` for coefficients from the lowest degree up (Horner).
fn polynomial(coefficients: &[f64], x: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * x + c)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn adinf_matches_the_limiting_distribution() {
        // Reference: the limiting distribution P(A² ≥ z), n → ∞, by
        // Marsaglia and Marsaglia's series (their ADinf with ADf, not the
        // short-cut polynomial under test), evaluated in Python with scipy's
        // erfc, and checked to 10 digits against Imhof's (1961) numerical
        // inversion for Σ Zⱼ²/(j(j + 1)) (scipy.integrate.quad; scratch
        // scripts, not in the repository). The short-cut is within 2·10⁻⁵
        // of it on (0, 10] (largest near z = 1); errfix at n = 10⁹ is below
        // 10⁻⁷.
        for (z, tail) in [
            (0.5, 0.746_814_373_5),
            (1.0, 0.357_266_673_2),
            (1.933, 0.099_994_623_21),
            (2.492, 0.050_022_186_36),
            (3.070, 0.025_218_271_14),
            (3.857, 0.010_241_153_23),
            (6.0, 0.000_967_451_941_5),
        ] {
            let p = anderson_darling_p_value(z, 1_000_000_000).unwrap();
            assert!(close(p, tail, 2e-5), "z {z}: {p} vs {tail}");
        }
        // The asymptotic percentage points of Anderson and Darling (1954),
        // to their three decimals.
        for (z, level) in [(1.933, 0.10), (2.492, 0.05), (3.857, 0.01)] {
            let p = anderson_darling_p_value(z, 1_000_000_000).unwrap();
            assert!(close(p, level, 3e-4), "z {z}: {p}");
        }
    }

    #[test]
    fn the_finite_n_correction_matches_simulation() {
        // Reference: P(A²ₙ > z) by Monte Carlo in numpy (Generator seeded
        // 20040101; 10⁷ samples of n = 8 uniforms, 4·10⁶ of n = 20), with
        // the standard error of each estimate. The asymptotic value alone is
        // 0.05002 at z = 2.492: off by 20 standard errors at n = 8.
        for (n, z, p_mc, se) in [
            (8, 1.0, 0.354_468, 0.000_15),
            (8, 2.492, 0.051_569, 0.000_07),
            (8, 3.857, 0.010_872, 0.000_033),
            (20, 1.0, 0.356_179, 0.000_24),
            (20, 2.492, 0.050_734, 0.000_11),
            (20, 3.857, 0.010_467, 0.000_051),
        ] {
            let p = anderson_darling_p_value(z, n).unwrap();
            assert!(
                close(p, p_mc, 4.0 * se),
                "n {n} z {z}: {p} vs {p_mc} ± {se}"
            );
        }
    }

    #[test]
    fn statistics_match_scipy() {
        // Reference: scipy 1.17.1, stats.kstest(u, 'uniform') gives
        // D = 0.09 (p 0.99996, exact method); stats.goodness_of_fit(
        // stats.uniform, u, known_params={'loc': 0, 'scale': 1},
        // statistic='ad').statistic gives A² = 0.111898892758.
        let u = [0.04, 0.12, 0.29, 0.33, 0.47, 0.58, 0.61, 0.77, 0.86, 0.95];
        assert!(close(
            anderson_darling(&u).unwrap(),
            0.111_898_892_758,
            1e-11
        ));
        assert!(close(kolmogorov_smirnov(&u).unwrap(), 0.09, 1e-15));
        // Order does not matter.
        let mut reversed = u;
        reversed.reverse();
        assert_eq!(anderson_darling(&reversed), anderson_darling(&u));
        // A clump near 0: A² 7.22832195577, D 0.48 by the same calls.
        let clumped = [0.001, 0.002, 0.004, 0.01, 0.02, 0.5, 0.6, 0.7, 0.8, 0.9];
        let a2 = anderson_darling(&clumped).unwrap();
        assert!(close(a2, 7.228_321_955_77, 1e-10), "{a2}");
        assert!(close(kolmogorov_smirnov(&clumped).unwrap(), 0.48, 1e-15));
        assert!(anderson_darling_p_value(a2, 10).unwrap() < 0.001);
    }

    #[test]
    fn kolmogorov_series_matches_scipy() {
        // Reference: scipy.special.kolmogorov(λ), the survival function of
        // Kolmogorov's limiting distribution. Both sides of the split at 1.18.
        for (lambda, q) in [
            (0.3, 0.999_990_694_199),
            (0.5, 0.963_945_243_665),
            (0.8, 0.544_142_411_574),
            (1.0, 0.269_999_671_677),
            (1.18, 0.123_453_809_43),
            (1.36, 0.049_485_876_755_4),
            (1.63, 0.009_846_364_888_49),
            (2.0, 0.000_670_925_255_78),
            (3.0, 3.045_995_948_94e-8),
        ] {
            let got = kolmogorov_survival(lambda);
            assert!(close(got, q, 1e-11 + 1e-9 * q), "λ {lambda}: {got} vs {q}");
        }
        assert_eq!(kolmogorov_survival(0.0), 1.0);
    }

    #[test]
    fn stephens_form_is_near_the_exact_distribution() {
        // Reference: scipy.stats.kstwo.sf(d, n), the exact distribution of D
        // (Simard and L'Ecuyer's algorithm).
        for (n, d, exact, tolerance) in [
            (20, 0.25, 0.137_625_7, 2e-3),
            (20, 0.35, 0.010_754_963, 1e-4),
            (100, 0.12, 0.103_303_75, 1e-3),
            (3000, 0.02, 0.178_898_14, 5e-4),
            (3000, 0.03, 0.008_848_227_8, 5e-5),
            (3000, 0.04, 0.000_131_535_13, 5e-6),
        ] {
            let p = kolmogorov_smirnov_p_value(d, n).unwrap();
            assert!(close(p, exact, tolerance), "n {n} D {d}: {p} vs {exact}");
        }
    }

    #[test]
    fn what_cannot_be_tested_is_refused() {
        assert_eq!(anderson_darling(&[]), None);
        assert_eq!(anderson_darling(&[0.5, 0.0]), None);
        assert_eq!(anderson_darling(&[0.5, 1.0]), None);
        assert_eq!(anderson_darling(&[f64::NAN]), None);
        assert_eq!(kolmogorov_smirnov(&[1.5]), None);
        assert_eq!(anderson_darling_p_value(-1.0, 5), None);
        assert_eq!(anderson_darling_p_value(f64::INFINITY, 5), None);
        assert_eq!(anderson_darling_p_value(1.0, 0), None);
        assert_eq!(kolmogorov_smirnov_p_value(1.1, 5), None);
        assert_eq!(kolmogorov_smirnov_p_value(0.1, 0), None);
        assert_eq!(anderson_darling_of_logs(&[(0.0, f64::NEG_INFINITY)]), None);
    }

    #[test]
    fn far_tails_keep_finite_small_p_values() {
        // The floor of the finite-n correction, 0.0006/n.
        let p = anderson_darling_p_value(40.0, 3000).unwrap();
        assert!(p > 0.0 && p < 2.1e-7, "{p}");
        let p = anderson_darling_p_value(40.0, 1_000_000_000).unwrap();
        assert!(p < 1e-12, "{p}");
        assert_eq!(anderson_darling_p_value(0.0, 3000), Some(1.0));
        assert_eq!(kolmogorov_smirnov_p_value(1.0, 3000), Some(0.0));
    }

    proptest! {
        #[test]
        fn p_values_are_probabilities_and_fall_as_statistics_grow(
            a in 0.0f64..50.0, b in 0.0f64..50.0, n in 1usize..10_000,
        ) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (p_lo, p_hi) = (
                anderson_darling_p_value(lo, n).unwrap(),
                anderson_darling_p_value(hi, n).unwrap(),
            );
            prop_assert!((0.0..=1.0).contains(&p_lo) && (0.0..=1.0).contains(&p_hi));
            // Marsaglia's pieces join within their stated error.
            prop_assert!(p_hi <= p_lo + 1e-5, "n {} A² {} → {}, {} → {}", n, lo, p_lo, hi, p_hi);
            let (d_lo, d_hi) = (lo / 50.0, hi / 50.0);
            let (k_lo, k_hi) = (
                kolmogorov_smirnov_p_value(d_lo, n).unwrap(),
                kolmogorov_smirnov_p_value(d_hi, n).unwrap(),
            );
            prop_assert!((0.0..=1.0).contains(&k_lo) && k_hi <= k_lo + 1e-12);
        }

        #[test]
        fn statistics_are_finite_and_non_negative(
            u in prop::collection::vec(1e-300f64..1.0, 1..200)
        ) {
            let u: Vec<f64> = u.into_iter().filter(|&u| u < 1.0).collect();
            prop_assume!(!u.is_empty());
            let a2 = anderson_darling(&u).unwrap();
            let d = kolmogorov_smirnov(&u).unwrap();
            prop_assert!(a2.is_finite() && a2 >= 0.0);
            prop_assert!((0.0..=1.0).contains(&d) && d >= 0.5 / u.len() as f64 - 1e-15);
        }
    }
}
