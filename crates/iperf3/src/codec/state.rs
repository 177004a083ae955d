//! The one-byte states both ends send on the control connection (iperf.h).

use crate::WireError;

/// A step of an iperf3 test. On the wire it is one signed byte; the server
/// announces most of them, the client sends `TestEnd`, `ClientTerminate` and
/// `IperfDone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum State {
    /// Server: the streams are all connected; start the timers.
    TestStart = 1,
    /// Server: send (or receive) now.
    TestRunning = 2,
    /// Defined by iperf3, never sent.
    ResultRequest = 3,
    /// Client: the test is over (its time, bytes or blocks are done).
    TestEnd = 4,
    /// Defined by iperf3, never sent.
    StreamBegin = 5,
    /// Defined by iperf3, never sent.
    StreamRunning = 6,
    /// Defined by iperf3, never sent.
    StreamEnd = 7,
    /// Defined by iperf3, never sent.
    AllStreamsEnd = 8,
    /// Server: send your parameters (JSON).
    ParamExchange = 9,
    /// Server: connect the data streams now.
    CreateStreams = 10,
    /// Server: the server is going away; the test is over.
    ServerTerminate = 11,
    /// Client: the client is going away (Ctrl-C).
    ClientTerminate = 12,
    /// Server: exchange results (the client sends its JSON first).
    ExchangeResults = 13,
    /// Server: print the results.
    DisplayResults = 14,
    /// Internal to iperf3, never sent.
    IperfStart = 15,
    /// Client: the client has printed its results and closes.
    IperfDone = 16,
    /// Server: refused, the server is busy (first byte after the cookie).
    AccessDenied = -1,
    /// Server: refused or failed; two 4-byte big-endian numbers follow
    /// (iperf3's error number, then the system's `errno`).
    ServerError = -2,
}

impl State {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        self as i8 as u8
    }

    /// The state a received byte stands for.
    pub fn from_byte(b: u8) -> Result<State, WireError> {
        use State::*;
        Ok(match b as i8 {
            1 => TestStart,
            2 => TestRunning,
            3 => ResultRequest,
            4 => TestEnd,
            5 => StreamBegin,
            6 => StreamRunning,
            7 => StreamEnd,
            8 => AllStreamsEnd,
            9 => ParamExchange,
            10 => CreateStreams,
            11 => ServerTerminate,
            12 => ClientTerminate,
            13 => ExchangeResults,
            14 => DisplayResults,
            15 => IperfStart,
            16 => IperfDone,
            -1 => AccessDenied,
            -2 => ServerError,
            other => return Err(WireError::UnknownState(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_iperf3_bytes() {
        // The bytes a real iperf3 3.12 client and server exchanged on loopback
        // for `iperf3 -c 127.0.0.1 -t 1` (strace of the client's control socket).
        let server_sent = [0x09, 0x0a, 0x01, 0x02, 0x0d, 0x0e];
        let client_sent = [0x04, 0x10];
        let decoded: Vec<State> = server_sent
            .iter()
            .map(|b| State::from_byte(*b).unwrap())
            .collect();
        assert_eq!(
            decoded,
            [
                State::ParamExchange,
                State::CreateStreams,
                State::TestStart,
                State::TestRunning,
                State::ExchangeResults,
                State::DisplayResults
            ]
        );
        assert_eq!(State::TestEnd.to_byte(), client_sent[0]);
        assert_eq!(State::IperfDone.to_byte(), client_sent[1]);
        assert_eq!(State::AccessDenied.to_byte(), 0xff);
        assert_eq!(State::ServerError.to_byte(), 0xfe);
        assert_eq!(State::ServerTerminate.to_byte(), 11);
        assert_eq!(State::ClientTerminate.to_byte(), 12);
    }

    #[test]
    fn every_state_round_trips_and_others_are_refused() {
        let mut known = 0;
        for b in 0..=255u8 {
            match State::from_byte(b) {
                Ok(s) => {
                    known += 1;
                    assert_eq!(s.to_byte(), b);
                }
                Err(e) => assert_eq!(e, WireError::UnknownState(b as i8)),
            }
        }
        assert_eq!(known, 18);
    }
}
