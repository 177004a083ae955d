//! Change points: E-divisive means with a t-test, as Apache Otava finds
//! them; pure functions over slices.

mod detect;
mod edivisive;
mod significance;
#[cfg(test)]
mod synthetic_tests;

pub use detect::{
    change_points, ChangePoint, Options, DEFAULT_MIN_MAGNITUDE, DEFAULT_P_VALUE, DEFAULT_WINDOW,
    MIN_WINDOW,
};
pub use edivisive::{best_split, e_divisive, split_p, MIN_SEGMENT};
pub use significance::{prediction_p, student_p, Moments, PrefixSums};
