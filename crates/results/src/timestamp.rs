//! Timestamps as the results document writes them.

use std::time::SystemTime;

/// `at` in RFC 3339 UTC to the second, e.g. `2024-05-01T10:00:00Z`: the form of
/// [`ResultsDocument::created`](crate::ResultsDocument::created) and
/// [`Run::started`](crate::Run::started).
pub fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `at` in RFC 3339 UTC to the millisecond, e.g. `2024-05-01T10:00:00.750Z`:
/// the form of [`Run::started`](crate::Run::started), so that runs a fraction
/// of a second apart (the lab's interleaved configurations) keep their order.
pub fn rfc3339_millis(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn formats_utc_to_the_second() {
        let at = UNIX_EPOCH + Duration::from_millis(1_714_557_600_750);
        assert_eq!(rfc3339(at), "2024-05-01T10:00:00Z");
        assert_eq!(rfc3339_millis(at), "2024-05-01T10:00:00.750Z");
    }
}
