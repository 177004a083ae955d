//! Stream numbering and order. The server numbers streams in the order it
//! accepts them, the client in the order it connects them; iperf3 gives the
//! first stream id 1 and the k-th (k > 1) id k + 1, so ids run 1, 3, 4, 5, …
//! (`iperf_add_stream`). With `--bidir` the client connects its `parallel`
//! sending streams first, then its receiving ones, so the server receives on
//! the first `parallel` streams it accepts and sends on the rest.

use super::TestMode;

/// The id of the stream connected (accepted) `index`-th, from 0.
pub fn stream_id(index: usize) -> u32 {
    match index {
        0 => 1,
        k => u32::try_from(k).unwrap_or(u32::MAX - 2) + 2,
    }
}

/// The index of the stream with id `id`; `None` for ids iperf3 never gives (0, 2).
pub fn stream_index(id: u32) -> Option<usize> {
    match id {
        1 => Some(0),
        0 | 2 => None,
        k => Some(k as usize - 2),
    }
}

/// Streams a test has: `parallel`, twice that with `--bidir`.
pub fn stream_count(mode: TestMode, parallel: usize) -> usize {
    match mode {
        TestMode::Bidirectional => 2 * parallel,
        _ => parallel,
    }
}

/// Whether the server sends on the stream accepted `index`-th.
pub fn server_sends(mode: TestMode, index: usize, parallel: usize) -> bool {
    match mode {
        TestMode::Normal => false,
        TestMode::Reverse => true,
        TestMode::Bidirectional => index >= parallel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_skip_two_as_iperf3s_do() {
        let ids: Vec<u32> = (0..5).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5, 6]);
        for i in 0..300 {
            assert_eq!(stream_index(stream_id(i)), Some(i));
        }
        assert_eq!(stream_index(2), None);
        assert_eq!(stream_index(0), None);
    }

    #[test]
    fn bidirectional_order_is_client_senders_first() {
        assert_eq!(stream_count(TestMode::Bidirectional, 3), 6);
        assert_eq!(stream_count(TestMode::Reverse, 3), 3);
        let sends: Vec<bool> = (0..6)
            .map(|i| server_sends(TestMode::Bidirectional, i, 3))
            .collect();
        assert_eq!(sends, [false, false, false, true, true, true]);
        assert!(server_sends(TestMode::Reverse, 0, 1));
        assert!(!server_sends(TestMode::Normal, 0, 1));
    }
}
