//! Change points of synthetic series: steps at known places are found
//! within one point, and pure noise yields none at the default level.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

/// Standard normal deviates by Box and Muller's transform of a seeded
/// uniform generator.
struct Noise(StdRng);

impl Noise {
    fn new(seed: u64) -> Noise {
        Noise(StdRng::seed_from_u64(seed))
    }

    fn gauss(&mut self) -> f64 {
        let u1: f64 = 1.0 - self.0.random::<f64>(); // (0, 1]
        let u2: f64 = self.0.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// `n` points around `mean` with standard deviation `sd`.
    fn series(&mut self, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n).map(|_| mean + sd * self.gauss()).collect()
    }
}

/// A series of `levels` (start index, mean) with noise of `sd`, `n` long.
fn steps(noise: &mut Noise, n: usize, levels: &[(usize, f64)], sd: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let mean = levels.iter().rev().find(|(at, _)| *at <= i).unwrap().1;
            mean + sd * noise.gauss()
        })
        .collect()
}

/// A seed, a length, the levels (start, mean) and the noise's deviation.
type Case = (u64, usize, &'static [(usize, f64)], f64);

#[test]
fn known_change_points_are_found_within_one_point() {
    let cases: &[Case] = &[
        // Throughput-like: 10 Gbit/s falling 5 % at 120, back at 260, 2 % noise... in bytes/s.
        (
            1,
            400,
            &[(0, 1.25e9), (120, 1.1875e9), (260, 1.25e9)],
            0.005e9,
        ),
        // Transaction time, µs: 40 → 48 at 70 (+20 %), noise 1 µs.
        (2, 150, &[(0, 40.0), (70, 48.0)], 1.0),
        // Several steps in a long series, each 6 σ.
        (
            3,
            1000,
            &[
                (0, 100.0),
                (180, 106.0),
                (430, 100.0),
                (640, 94.0),
                (900, 100.0),
            ],
            1.0,
        ),
        // A change near the start and one near the end.
        (4, 300, &[(0, 10.0), (12, 14.0), (285, 10.0)], 0.5),
    ];
    for &(seed, n, levels, sd) in cases {
        let mut noise = Noise::new(seed);
        let xs = steps(&mut noise, n, levels, sd);
        let found = change_points(&xs, &Options::default());
        let want: Vec<usize> = levels.iter().skip(1).map(|l| l.0).collect();
        let at: Vec<usize> = found.iter().map(|c| c.index).collect();
        assert_eq!(
            at.len(),
            want.len(),
            "seed {seed}: found {at:?}, want {want:?}"
        );
        for (got, want) in at.iter().zip(&want) {
            assert!(
                got.abs_diff(*want) <= 1,
                "seed {seed}: found {at:?}, want {want:?}"
            );
        }
        for c in &found {
            assert!(c.p_value <= DEFAULT_P_VALUE, "{c:?}");
        }
    }
}

#[test]
fn before_and_after_means_and_the_relative_change_are_the_stretches() {
    let mut noise = Noise::new(7);
    let xs = steps(&mut noise, 200, &[(0, 1000.0), (100, 900.0)], 5.0);
    let found = change_points(&xs, &Options::default());
    assert_eq!(found.len(), 1, "{found:?}");
    let c = found[0];
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    assert_eq!((c.before_n, c.after_n), (c.index, 200 - c.index));
    assert!((c.before_mean - mean(&xs[..c.index])).abs() < 1e-9);
    assert!((c.after_mean - mean(&xs[c.index..])).abs() < 1e-9);
    assert!((c.relative_change() + 0.1).abs() < 0.01, "{c:?}");
}

#[test]
fn pure_noise_of_500_points_has_no_change_point_at_the_default_level() {
    for seed in 100..120 {
        let mut noise = Noise::new(seed);
        let xs = noise.series(500, 1e9, 3e7);
        let found = change_points(&xs, &Options::default());
        assert!(found.is_empty(), "seed {seed}: {found:?}");
    }
}

#[test]
fn a_window_shorter_than_the_series_still_finds_a_change_in_its_middle() {
    let mut noise = Noise::new(11);
    let xs = steps(&mut noise, 120, &[(0, 50.0), (61, 55.0)], 0.5);
    let small = Options {
        window: 20,
        ..Options::default()
    };
    let at: Vec<usize> = change_points(&xs, &small).iter().map(|c| c.index).collect();
    assert_eq!(at.len(), 1, "{at:?}");
    assert!(at[0].abs_diff(61) <= 1, "{at:?}");
}
