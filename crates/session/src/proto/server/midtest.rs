//! What the server makes of a running test (a workload's or a profile's):
//! what it sees at one look (the daemon shutting down, the bytes its workers
//! moved, how long the client's control connection has been silent, the
//! time) and what came on the control connection in, a decision out. No
//! socket, no clock and no shared counter: the session (`run_test`, the
//! profile's run) only looks, receives and acts.

use std::time::{Duration, Instant};

use linkperf_protocol::{decode_client, ClientMessage, ErrorCode, LimitKind, WireError};

use crate::proto::budget::Limit;
use crate::proto::heard::{Heard, Received, RecvError};
use crate::proto::server::fail::{fail, limit_fail, out_of_order, shutting_down, Fail};

/// A client counts as gone mid-test when nothing at all has come from its
/// host for this long.
pub(crate) const PEER_SILENCE: Duration = Duration::from_secs(3);

/// What the session sees of a running test at one look.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    /// When it looked.
    pub now: Instant,
    /// The daemon is shutting down.
    pub shutting_down: bool,
    /// The bytes the test's workers have moved so far, both directions.
    pub bytes: u64,
    /// How long ago the client's kernel last acknowledged anything on the
    /// control connection (its keepalive probes included), if known.
    pub control_silent: Option<Duration>,
}

/// Whether a running test goes on, look after look: the session's byte
/// limit, the client's host still there, the test's deadline.
///
/// A client is gone (its host turned off, its path cut) when neither its
/// data connections nor its control connection have shown anything for
/// [`PEER_SILENCE`]. Its control connection is silent during a test but for
/// keepalive probes, which its kernel answers every second; its data
/// connections move while their traffic flows. A lossy path still moves
/// data, and one probe answered in three keeps the control connection
/// alive, so neither is taken for a gone client.
#[derive(Debug)]
pub(crate) struct Watch {
    /// The bytes at the last look, and when they last changed.
    bytes: u64,
    moved: Instant,
    deadline: Instant,
    max_bytes: Option<u64>,
}

impl Watch {
    /// Watching from `now` until `deadline`, with the session's byte limit.
    pub(crate) fn new(now: Instant, deadline: Instant, max_bytes: Option<u64>) -> Self {
        Watch {
            bytes: 0,
            moved: now,
            deadline,
            max_bytes,
        }
    }

    /// `Ok` while the test goes on at `look`; else the failure that ends
    /// it: the daemon shutting down (an abort), the byte limit passed, the
    /// client gone, or the deadline passed (`overdue` says why).
    pub(crate) fn still_on(
        &mut self,
        look: &Look,
        overdue: impl FnOnce() -> Fail,
    ) -> Result<(), Fail> {
        if look.shutting_down {
            return Err(shutting_down());
        }
        if let Some(max) = self.max_bytes.filter(|&max| look.bytes > max) {
            return Err(limit_fail(Limit {
                kind: LimitKind::BytesPerSession,
                got: look.bytes,
                max,
                in_use: 0,
            }));
        }
        if look.bytes != self.bytes {
            self.bytes = look.bytes;
            self.moved = look.now;
        } else if let Some(control) = look.control_silent {
            let data = look.now.saturating_duration_since(self.moved);
            if data >= PEER_SILENCE && control >= PEER_SILENCE {
                return Err(fail(
                    ErrorCode::Aborted,
                    format!(
                        "client vanished mid-test: nothing from its host for {} s, on its data \
                         connections or its control connection",
                        PEER_SILENCE.as_secs()
                    ),
                ));
            }
        }
        if look.now > self.deadline {
            return Err(overdue());
        }
        Ok(())
    }
}

/// What one receive on the control connection came to: `None` when nothing
/// came in the wait, else the client's message; a failure when the
/// connection closed (`heard.how` says how, as the channel saw it), failed
/// or carried what is not a message (`frame_setting`: how the front end
/// names the daemon's largest control message, for a frame past it).
pub(crate) fn received(heard: Heard, frame_setting: &str) -> Result<Option<ClientMessage>, Fail> {
    let how_it_went = heard.how;
    match heard.got {
        Ok(Received::Timeout) => Ok(None),
        Ok(Received::Frame(f)) => decode_client(&f)
            .map(Some)
            .map_err(|e| fail(ErrorCode::Malformed, e.to_string())),
        Ok(Received::Closed) => Err(fail(
            ErrorCode::Aborted,
            format!("client vanished mid-test: it {how_it_went}"),
        )),
        Err(RecvError::Wire(e)) => Err(wire_fail(e, frame_setting)),
        Err(e) => Err(fail(ErrorCode::Internal, e.to_string())),
    }
}

/// A frame the decoder refused; `frame_setting` names the daemon's largest
/// control message.
pub(crate) fn wire_fail(e: WireError, frame_setting: &str) -> Fail {
    match e {
        WireError::FrameTooLarge { .. } => fail(
            ErrorCode::TooLarge,
            format!("{e} (this server's {frame_setting})"),
        ),
        e => fail(ErrorCode::Malformed, e.to_string()),
    }
}

/// How the client ended its side of a running test.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Its side is done: the server's results are due.
    Finished,
    /// It gave up on the test: the server's results are still due.
    Aborted,
}

/// The client's message while a workload test runs: it ends the test, or is
/// out of order.
pub(crate) fn ended(msg: ClientMessage) -> Result<Ended, Fail> {
    match msg {
        ClientMessage::Finished => Ok(Ended::Finished),
        ClientMessage::Abort { .. } => Ok(Ended::Aborted),
        other => Err(out_of_order("finished", &other)),
    }
}

/// What the client said while its profile ran.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ProfileSaid {
    /// It ended its side.
    Ended(Ended),
    /// Transaction `txn` ended on its side after `iterations` (by user).
    TxnEnd {
        /// The transaction, counted from 0.
        txn: u32,
        /// How many iterations each user ran.
        iterations: Vec<u64>,
    },
}

/// The client's message while a profile runs: as [`ended`], or the end of
/// one of its transactions.
pub(crate) fn profile_said(msg: ClientMessage) -> Result<ProfileSaid, Fail> {
    match msg {
        ClientMessage::TxnEnd { txn, iterations } => Ok(ProfileSaid::TxnEnd { txn, iterations }),
        other => ended(other).map(ProfileSaid::Ended),
    }
}

/// The ends of a profile's timed transactions as the client tells them:
/// each once, in order, with one count per user. Anything else is a
/// confused or hostile client.
#[derive(Debug)]
pub(crate) struct TxnEnds {
    users: usize,
    /// The last transaction ended.
    last: Option<usize>,
}

impl TxnEnds {
    /// For a profile of `users` users.
    pub(crate) fn new(users: u32) -> Self {
        TxnEnds {
            users: users as usize,
            last: None,
        }
    }

    /// The client ended transaction `txn` after `iterations` (by user);
    /// `timed` says which of the profile's transactions are limited by
    /// time. The transaction to stop this side's users at, or why not.
    pub(crate) fn end(
        &mut self,
        txn: u32,
        iterations: &[u64],
        timed: impl Fn(usize) -> bool,
    ) -> Result<usize, Fail> {
        if iterations.len() != self.users {
            return Err(fail(
                ErrorCode::Malformed,
                format!(
                    "txn_end carries {} counts for {} users",
                    iterations.len(),
                    self.users
                ),
            ));
        }
        let txn = txn as usize;
        if !timed(txn) || self.last.is_some_and(|e| txn <= e) {
            return Err(fail(
                ErrorCode::OutOfOrder,
                format!(
                    "txn_end for transaction {txn}: not a timed transaction of this \
                     profile, or already ended"
                ),
            ));
        }
        self.last = Some(txn);
        Ok(txn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkperf_protocol::encode_client;

    fn look(now: Instant, bytes: u64, control_silent: Option<Duration>) -> Look {
        Look {
            now,
            shutting_down: false,
            bytes,
            control_silent,
        }
    }

    fn overdue() -> Fail {
        fail(ErrorCode::Aborted, "overdue")
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn a_client_is_gone_only_when_its_data_and_its_control_connection_are_both_silent() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, t0 + secs(60.0), None);
        // Data moves: the control connection's silence does not count.
        for (i, t) in [0.0, 1.0, 2.0, 3.5, 5.0].into_iter().enumerate() {
            let l = look(t0 + secs(t), 100 * (i as u64 + 1), Some(secs(10.0)));
            assert!(w.still_on(&l, overdue).is_ok(), "at {t} s");
        }
        // Data stops at 5 s; the control connection answered 1 s ago.
        assert!(w
            .still_on(&look(t0 + secs(9.0), 500, Some(secs(1.0))), overdue)
            .is_ok());
        // Nothing known of the control connection: never taken for gone.
        assert!(w
            .still_on(&look(t0 + secs(9.5), 500, None), overdue)
            .is_ok());
        // Data still for 2.9 s: not yet.
        let mut w2 = Watch::new(t0, t0 + secs(60.0), None);
        w2.still_on(&look(t0, 7, Some(secs(0.0))), overdue).unwrap();
        assert!(w2
            .still_on(&look(t0 + secs(2.9), 7, Some(secs(5.0))), overdue)
            .is_ok());
        // Both silent for 3 s: gone.
        let e = w2
            .still_on(&look(t0 + secs(3.0), 7, Some(PEER_SILENCE)), overdue)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Aborted);
        assert!(
            e.message.contains("client vanished mid-test"),
            "{}",
            e.message
        );
        // And the first look's data: still from the start.
        let e = w
            .still_on(
                &look(t0 + secs(8.0) + PEER_SILENCE, 500, Some(secs(4.0))),
                overdue,
            )
            .unwrap_err();
        assert!(
            e.message.contains("nothing from its host for 3 s"),
            "{}",
            e.message
        );
    }

    #[test]
    fn shutting_down_the_byte_limit_and_the_deadline_each_end_a_test() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0, t0 + secs(10.0), Some(1_000));
        let mut l = look(t0, 1_000, None);
        assert!(w.still_on(&l, overdue).is_ok(), "at the limit is within it");
        l.bytes = 1_001;
        let e = w.still_on(&l, overdue).unwrap_err();
        assert_eq!(e.code, ErrorCode::Limit);
        let limit = e.limit.expect("the limit's figures");
        assert_eq!(
            (limit.kind, limit.got, limit.max),
            (LimitKind::BytesPerSession, 1_001, 1_000)
        );
        let mut w = Watch::new(t0, t0 + secs(10.0), None);
        let e = w
            .still_on(&look(t0 + secs(10.5), 1, None), overdue)
            .unwrap_err();
        assert_eq!(e.message, "overdue");
        let mut down = look(t0 + secs(10.5), u64::MAX, None);
        down.shutting_down = true;
        let e = w.still_on(&down, overdue).unwrap_err();
        assert_eq!(e.code, ErrorCode::Aborted);
        assert!(e.message.contains("shutting down"), "{}", e.message);
    }

    #[test]
    fn each_receive_comes_to_quiet_a_message_or_the_failure_it_tells() {
        let heard = |got, how| Heard { got, how };
        let setting = "largest control message";
        assert!(received(heard(Ok(Received::Timeout), ""), setting)
            .unwrap()
            .is_none());
        let frame = encode_client(&ClientMessage::Finished);
        let got = received(heard(Ok(Received::Frame(frame[4..].to_vec())), ""), setting);
        assert_eq!(
            got.map(|m| m.map(|m| m.kind())).unwrap(),
            Some(ClientMessage::Finished.kind())
        );
        let e = received(heard(Ok(Received::Frame(b"{]".to_vec())), ""), setting).unwrap_err();
        assert_eq!(e.code, ErrorCode::Malformed);
        let e = received(heard(Ok(Received::Closed), "closed its end"), setting).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::Aborted,
                "client vanished mid-test: it closed its end"
            )
        );
        let big = WireError::FrameTooLarge { len: 9, max: 8 };
        let e = received(heard(Err(RecvError::Wire(big)), ""), setting).unwrap_err();
        assert_eq!(e.code, ErrorCode::TooLarge);
        assert!(
            e.message.contains("this server's largest control message"),
            "{}",
            e.message
        );
    }

    #[test]
    fn finished_and_abort_end_any_test_and_only_a_profile_tells_transactions() {
        assert_eq!(ended(ClientMessage::Finished).unwrap(), Ended::Finished);
        let abort = || ClientMessage::Abort {
            reason: "user".into(),
        };
        assert_eq!(ended(abort()).unwrap(), Ended::Aborted);
        assert_eq!(
            profile_said(abort()).unwrap(),
            ProfileSaid::Ended(Ended::Aborted)
        );
        let txn = || ClientMessage::TxnEnd {
            txn: 2,
            iterations: vec![40, 41],
        };
        assert_eq!(
            profile_said(txn()).unwrap(),
            ProfileSaid::TxnEnd {
                txn: 2,
                iterations: vec![40, 41]
            }
        );
        let e = ended(txn()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::OutOfOrder, "expected finished, got txn_end")
        );
        let e = profile_said(ClientMessage::Start).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::OutOfOrder, "expected finished, got start")
        );
    }

    #[test]
    fn a_profiles_timed_transactions_end_once_each_in_order_with_a_count_per_user() {
        // Transactions 1 and 3 are timed.
        let timed = |t: usize| t == 1 || t == 3;
        let mut e = TxnEnds::new(2);
        let f = e.end(1, &[5], timed).unwrap_err();
        assert_eq!(
            (f.code, f.message.as_str()),
            (ErrorCode::Malformed, "txn_end carries 1 counts for 2 users")
        );
        let f = e.end(0, &[5, 6], timed).unwrap_err();
        assert_eq!(f.code, ErrorCode::OutOfOrder, "not timed");
        assert_eq!(e.end(1, &[5, 6], timed).unwrap(), 1);
        let f = e.end(1, &[5, 6], timed).unwrap_err();
        assert_eq!(f.code, ErrorCode::OutOfOrder, "already ended");
        assert!(f.message.contains("transaction 1"), "{}", f.message);
        assert_eq!(e.end(3, &[7, 8], timed).unwrap(), 3);
        assert_eq!(
            e.end(1, &[5, 6], timed).unwrap_err().code,
            ErrorCode::OutOfOrder
        );
        assert_eq!(
            e.end(u32::MAX, &[0, 0], timed).unwrap_err().code,
            ErrorCode::OutOfOrder
        );
    }
}
