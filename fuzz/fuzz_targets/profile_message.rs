//! A uperf profile as a client sends it in the control protocol's `profile`
//! message: a serde value, not a file the server parsed. Whatever decodes,
//! the server's first computations (users, least time, sizes) never panic;
//! what passes `Profile::check` can be checked for running, split by host,
//! mirrored, compiled for both ends and made a spec.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linkperf_engine::program::{compile, workers_for};
use linkperf_workload::profile::{
    check_runnable, mirror, profile_spec, split_by_host, FlowopKind, Profile,
};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = serde_json::from_slice::<Profile>(data) else {
        return;
    };
    let _ = (p.users(), p.least_time(), p.transactions());
    for f in p
        .groups
        .iter()
        .flat_map(|g| g.transactions.iter().flat_map(|t| t.flowops.iter()))
    {
        if let FlowopKind::Read(x)
        | FlowopKind::Write(x)
        | FlowopKind::Send(x)
        | FlowopKind::Recv(x)
        | FlowopKind::Sendfile(x) = &f.kind
        {
            for key in [0, 1, u64::MAX] {
                let _ = x.size.at(key);
            }
        }
    }
    if p.check().is_err() {
        return;
    }
    let _ = check_runnable(&p);
    let _ = split_by_host(&p);
    let _ = workers_for(64, &p);
    let _ = compile(&p);
    let _ = compile(&mirror(&p));
    let spec = profile_spec(p);
    let _ = spec.validate();
});
