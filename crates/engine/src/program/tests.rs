//! Both sides of a profile on loopback, with the control exchange done in
//! process: real sockets, real workers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkperf_protocol::DataToken;

use crate::LiveStats;
use linkperf_workload::profile::{
    mirror, Flowop, FlowopKind, Group, Limit, Profile, ProfileProtocol, Transaction,
};

use super::fixtures::{connect_over, op, x};
use super::*;

fn txn(limit: Limit, flowops: Vec<Flowop>) -> Transaction {
    Transaction {
        limit,
        rate: None,
        flowops,
        line: 1,
    }
}

fn connect() -> Flowop {
    connect_over(ProfileProtocol::Tcp)
}

/// Runs `p` with `threads` workers a side; (client, server) outcomes.
fn run_both(p: &Profile, threads: u32) -> (ProgramOutcome, ProgramOutcome) {
    let token = DataToken([7; 16]);
    // Both sides publish live totals; once the run is over they are its totals.
    let live = [
        Arc::new(LiveStats::new(workers_for(threads, p))),
        Arc::new(LiveStats::new(workers_for(threads, p))),
    ];
    let server = ProgramRun::start(ProgramConfig {
        profile: mirror(p),
        role: Role::Server,
        threads,
        affinity: None,
        busy_poll: false,
        token,
        endpoints: vec![],
        listeners: vec![],
        bind_ip: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        udp_endpoints: vec![],
        udp_peer: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        live: Some(live[1].clone()),
    })
    .unwrap();
    let client = ProgramRun::start(ProgramConfig {
        profile: p.clone(),
        role: Role::Client,
        threads,
        affinity: None,
        busy_poll: false,
        token,
        endpoints: server.endpoints().to_vec(),
        listeners: vec![],
        bind_ip: None,
        udp_endpoints: server.udp_endpoints().to_vec(),
        udp_peer: None,
        live: Some(live[0].clone()),
    })
    .unwrap();
    let r = client.drive(
        |i, iterations| {
            server.stop(i, iterations);
            server.wait_ended(i, Instant::now() + Duration::from_secs(10))
        },
        &|| false,
    );
    assert!(r.is_ok(), "{r:?}");
    let c = client.finish();
    // The server's users reach the end of their script (its last reads)
    // once the client's are done.
    assert!(
        server.wait_all_finished(Instant::now() + Duration::from_secs(10)),
        "the server's users never finished"
    );
    server.abort();
    let s = server.finish();
    assert_eq!(live[0].totals(), c.totals, "the client's live totals");
    assert_eq!(live[1].totals(), s.totals, "the server's live totals");
    (c, s)
}

#[test]
fn a_request_response_loop_moves_its_bytes_and_both_sides_agree() {
    let p = Profile {
        name: "rr".into(),
        groups: vec![Group {
            number: 0,
            users: 3,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![connect()]),
                txn(
                    Limit::Iterations(5),
                    vec![
                        op(FlowopKind::Write(x(90)), 10),
                        op(FlowopKind::Read(x(90)), 1),
                    ],
                ),
                txn(Limit::Iterations(1), vec![op(FlowopKind::Disconnect, 1)]),
            ],
        }],
    };
    let (c, s) = run_both(&p, 2);
    assert_eq!(c.failure, None);
    let t = &c.report.transactions[1];
    assert_eq!(t.iterations, 15, "five per user");
    assert_eq!(t.tx_bytes, 3 * 5 * 10 * 90);
    assert_eq!(t.rx_bytes, 3 * 5 * 90);
    let writes = c.report.flowops.iter().find(|f| f.kind == "write").unwrap();
    assert_eq!(writes.operations, 3 * 5 * 10, "count=10 is ten operations");
    assert_eq!(c.totals.tx_bytes, s.totals.rx_bytes);
    assert_eq!(c.totals.rx_bytes, s.totals.tx_bytes);
    assert_eq!(c.connections, 3);
    assert_eq!(s.connections, 3);
}

/// A profile counts into the engine's counters, its window the whole run:
/// each side's report takes its totals, errors, iteration times and
/// per-second intervals from them, the intervals add up to the totals, and
/// the transaction elements to both.
#[test]
fn a_profiles_report_is_what_its_counters_counted() {
    let p = Profile {
        name: "counted".into(),
        groups: vec![Group {
            number: 0,
            users: 3,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![connect()]),
                txn(
                    Limit::Duration(Duration::from_millis(1200)),
                    vec![
                        op(FlowopKind::Write(x(300)), 1),
                        op(FlowopKind::Read(x(200)), 1),
                    ],
                ),
                txn(Limit::Iterations(1), vec![op(FlowopKind::Disconnect, 1)]),
            ],
        }],
    };
    let (c, s) = run_both(&p, 2);
    assert_eq!((c.failure.as_deref(), s.failure.as_deref()), (None, None));
    for (side, o) in [("client", &c), ("server", &s)] {
        let k = &o.counts.counters;
        assert_eq!(o.totals, k.totals, "{side}");
        let iv = k.intervals();
        assert!(iv.len() >= 2, "{side}: {iv:?}");
        let sum = |f: fn(&linkperf_measured::Interval) -> u64| iv.iter().map(f).sum::<u64>();
        assert_eq!(sum(|i| i.tx_bytes), k.totals.tx_bytes, "{side}");
        assert_eq!(sum(|i| i.rx_bytes), k.totals.rx_bytes, "{side}");
        assert_eq!(sum(|i| i.transactions), k.totals.transactions, "{side}");
        assert!(
            iv[..iv.len() - 1].iter().all(|i| i.length_s == 1.0),
            "{iv:?}"
        );
        // Seconds of the run, up to the last one anything was counted in.
        let length: f64 = iv.iter().map(|i| i.length_s).sum();
        assert!(
            length <= o.window_s + 1e-9,
            "{side}: {length} {}",
            o.window_s
        );
        assert!(iv.iter().all(|i| i.start_s < o.window_s), "{side}: {iv:?}");
        assert_eq!(k.window_latency().count(), k.totals.transactions, "{side}");
        // The elements add up to the side's counts.
        let t = &o.counts.txns;
        assert_eq!(
            t.iter().map(|t| t.count).sum::<u64>(),
            k.totals.transactions
        );
        assert_eq!(t.iter().map(|t| t.tx).sum::<u64>(), k.totals.tx_bytes);
        assert_eq!(
            t.iter().map(|t| t.rx).sum::<u64>() + o.counts.drained,
            k.totals.rx_bytes,
            "{side}"
        );
        let mut env = linkperf_measured::Environment::default();
        let r = o.side_report(
            None,
            linkperf_measured::ProcessMethod::RusageThreadSum,
            false,
            &mut env,
        );
        assert_eq!(r.intervals, iv, "{side}");
        assert_eq!(r.totals, k.totals, "{side}");
        assert_eq!(r.tx_bytes, k.totals.tx_bytes, "{side}");
        assert_eq!(r.rx_bytes, k.totals.rx_bytes - o.counts.drained, "{side}");
        assert_eq!(r.transactions, k.totals.transactions, "{side}");
        assert_eq!((r.errors, r.error_samples.len()), (0, 0), "{side}");
        let latency = r.latency.expect("iteration times");
        assert_eq!(latency.count, k.totals.transactions, "{side}");
        assert_eq!(r.connections, 3, "{side}");
    }
    assert_eq!(c.totals.tx_bytes, s.totals.rx_bytes);
    assert_eq!(c.totals.rx_bytes, s.totals.tx_bytes);
}

#[test]
fn a_timed_transaction_where_the_server_writes_first_ends_clean() {
    // The client reads first: the server's mirror writes ahead, and what it
    // wrote past the client's last iteration is drained before the next
    // transaction, whose exact counts prove the streams stayed aligned.
    let p = Profile {
        name: "timed".into(),
        groups: vec![Group {
            number: 0,
            users: 4,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![connect()]),
                txn(
                    Limit::Duration(Duration::from_millis(300)),
                    vec![
                        op(FlowopKind::Read(x(4000)), 1),
                        op(FlowopKind::Write(x(10)), 1),
                    ],
                ),
                txn(
                    Limit::Iterations(3),
                    vec![
                        op(FlowopKind::Write(x(7)), 1),
                        op(FlowopKind::Read(x(5)), 1),
                    ],
                ),
                txn(Limit::Iterations(1), vec![op(FlowopKind::Disconnect, 1)]),
            ],
        }],
    };
    let (c, s) = run_both(&p, 2);
    assert_eq!(c.failure, None);
    assert_eq!(s.failure, None);
    let timed = &c.report.transactions[1];
    assert!(timed.iterations > 4, "{timed:?}");
    assert!(timed.seconds >= 0.3, "{timed:?}");
    let after = &c.report.transactions[2];
    assert_eq!(
        (after.iterations, after.tx_bytes, after.rx_bytes),
        (12, 84, 60)
    );
    assert_eq!(c.totals.tx_bytes, s.totals.rx_bytes);
    assert_eq!(c.totals.rx_bytes, s.totals.tx_bytes);
}

#[test]
fn think_adds_its_time_and_rate_paces_iterations() {
    let p = Profile {
        name: "paced".into(),
        groups: vec![Group {
            number: 0,
            users: 2,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![connect()]),
                Transaction {
                    limit: Limit::Duration(Duration::from_millis(500)),
                    rate: Some(linkperf_workload::profile::Rate(20.0)),
                    flowops: vec![
                        op(FlowopKind::Write(x(1)), 1),
                        op(FlowopKind::Read(x(1)), 1),
                    ],
                    line: 1,
                },
                txn(
                    Limit::Iterations(4),
                    vec![
                        op(FlowopKind::Write(x(1)), 1),
                        op(
                            FlowopKind::Think {
                                duration: Duration::from_millis(20),
                                busy: false,
                            },
                            1,
                        ),
                        op(FlowopKind::Read(x(1)), 1),
                    ],
                ),
            ],
        }],
    };
    let (c, _) = run_both(&p, 1);
    assert_eq!(c.failure, None);
    let paced = &c.report.transactions[1];
    // 20 per second for half a second: never ahead of the pace, so ten per
    // user at most, however fast the host (the pace itself, slot by slot, is
    // checked in virtual time in user.rs); each user's first at once.
    assert!((2..=20).contains(&paced.iterations), "{paced:?}");
    let thought = c.report.transactions[2].latency.as_ref().unwrap();
    assert!(
        thought.min >= 20_000.0,
        "think time is in the iteration: {thought:?}"
    );
}

fn udp_connect_op() -> Flowop {
    connect_over(ProfileProtocol::Udp)
}

#[test]
fn datagrams_carry_one_operation_each_and_both_sides_agree() {
    let p = Profile {
        name: "udp".into(),
        groups: vec![Group {
            number: 0,
            users: 3,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![udp_connect_op()]),
                txn(
                    Limit::Duration(Duration::from_millis(300)),
                    vec![
                        op(FlowopKind::Send(x(200)), 1),
                        op(FlowopKind::Recv(x(8192)), 1),
                    ],
                ),
                txn(
                    Limit::Iterations(7),
                    vec![
                        op(FlowopKind::Write(x(3)), 2),
                        op(FlowopKind::Read(x(5)), 1),
                    ],
                ),
                txn(Limit::Iterations(1), vec![op(FlowopKind::Disconnect, 1)]),
            ],
        }],
    };
    let (c, s) = run_both(&p, 2);
    assert_eq!(c.failure, None);
    let timed = &c.report.transactions[1];
    assert!(timed.iterations > 3, "{timed:?}");
    assert_eq!(timed.tx_bytes, timed.iterations * 200);
    assert_eq!(timed.rx_bytes, timed.iterations * 8192);
    let after = &c.report.transactions[2];
    assert_eq!(
        (after.iterations, after.tx_bytes, after.rx_bytes),
        (21, 126, 105)
    );
    assert_eq!(c.totals.tx_bytes, s.totals.rx_bytes);
    assert_eq!(c.totals.rx_bytes, s.totals.tx_bytes);
}

#[test]
fn a_client_accept_is_the_server_connecting_back() {
    let mut p = Profile {
        name: "back".into(),
        groups: vec![Group {
            number: 0,
            users: 2,
            line: 1,
            transactions: vec![
                txn(Limit::Iterations(1), vec![connect()]),
                txn(
                    Limit::Iterations(3),
                    vec![
                        op(FlowopKind::Read(x(50)), 1),
                        op(FlowopKind::Write(x(5)), 1),
                    ],
                ),
            ],
        }],
    };
    // The client accepts: the server connects to the client's listeners.
    let FlowopKind::Connect(e) = p.groups[0].transactions[0].flowops[0].kind.clone() else {
        unreachable!()
    };
    p.groups[0].transactions[0].flowops[0].kind = FlowopKind::Accept(e);
    let token = DataToken([9; 16]);
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let listeners = bind_listeners(ip, workers_for(1, &p)).unwrap();
    let client_ports: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let server = ProgramRun::start(ProgramConfig {
        profile: mirror(&p),
        role: Role::Server,
        threads: 1,
        affinity: None,
        busy_poll: false,
        token,
        endpoints: client_ports,
        listeners: vec![],
        bind_ip: Some(ip),
        udp_endpoints: vec![],
        udp_peer: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        live: None,
    })
    .unwrap();
    let client = ProgramRun::start(ProgramConfig {
        profile: p.clone(),
        role: Role::Client,
        threads: 1,
        affinity: None,
        busy_poll: false,
        token,
        endpoints: server.endpoints().to_vec(),
        listeners,
        bind_ip: None,
        udp_endpoints: vec![],
        udp_peer: None,
        live: None,
    })
    .unwrap();
    client.drive(|_, _| Ok(vec![]), &|| false).unwrap();
    let c = client.finish();
    server.abort();
    let s = server.finish();
    assert_eq!(c.failure, None);
    assert_eq!(c.report.transactions[1].rx_bytes, 2 * 3 * 50);
    assert_eq!(c.totals.rx_bytes, s.totals.tx_bytes);
    assert_eq!(s.connections, 2);
}
