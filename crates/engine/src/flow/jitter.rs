//! The one interarrival jitter (RFC 3550 §6.4.1 and A.8, RFC 1889 before
//! it): J is updated on every packet with D, the difference of its transit
//! time (arrival on the receiver's clock less send time on the sender's)
//! from the previous packet's: J += (|D| − J) / 16. The two clocks need not
//! agree: only differences of transit times count. linkperf's UDP streams
//! keep it in nanoseconds, the iperf3 server in seconds, as iperf3 does.

/// A receiver's jitter, in the unit its transit times are given in.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter {
    value: f64,
    last_transit: Option<f64>,
}

impl Jitter {
    /// A packet arrived `transit` after it was sent (any unit, the same
    /// for every packet).
    pub fn arrived(&mut self, transit: f64) {
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).abs();
            self.value += (d - self.value) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    /// The jitter so far.
    pub fn value(&self) -> f64 {
        self.value
    }

    /// Whether any packet arrived.
    pub fn started(&self) -> bool {
        self.last_transit.is_some()
    }

    /// Starts the jitter afresh from the next packet, the last transit
    /// kept (iperf3 does so when its omitted seconds end).
    pub fn restart(&mut self) {
        self.value = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_moves_a_sixteenth_of_the_way_to_each_difference() {
        let mut j = Jitter::default();
        assert!(!j.started());
        j.arrived(100.0);
        assert_eq!(j.value(), 0.0, "one packet has no difference yet");
        j.arrived(116.0);
        assert_eq!(j.value(), 1.0);
        j.arrived(100.0);
        assert_eq!(j.value(), 1.0 + (16.0 - 1.0) / 16.0);
        j.restart();
        assert_eq!(j.value(), 0.0);
        j.arrived(100.0);
        assert_eq!(j.value(), 0.0, "the last transit was kept");
    }
}
