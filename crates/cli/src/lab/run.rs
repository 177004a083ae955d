//! `linkperf lab run`: every configuration up at once and run interleaved
//! (or, `--order sequential`, each up in turn), `linkperf serve` and
//! `linkperf suite` in its namespaces,
//! the link recorded in every results file, then the comparison.

use super::*;

/// How long `linkperf serve` may take to listen.
pub(super) const SERVE_READY: Duration = Duration::from_secs(10);

/// How often running children are checked.
pub(super) const POLL: Duration = Duration::from_millis(50);

/// Fewest runs of every test the lab asks for, unless told otherwise.
pub(super) const LAB_MIN_REPEAT: u32 = 3;

/// What one interleaved step of a configuration did.
pub(super) enum Step {
    /// It ran a run (or its pairs did), all without failure.
    Ran,
    /// A pair's run failed.
    Failed,
    /// Its suite had nothing left to run.
    Done,
}

/// The result files of one configuration.
pub(super) fn result_files(dir: &Path, name: &str, pairs: u32) -> (PathBuf, Vec<PathBuf>) {
    let all = dir.join(format!("{name}.json"));
    let per_pair = if pairs > 1 {
        (1..=pairs)
            .map(|k| dir.join(format!("{name}-pair{k}.json")))
            .collect()
    } else {
        vec![all.clone()]
    };
    (all, per_pair)
}

/// The suite options the user gave, for `linkperf suite`.
pub(super) fn suite_options(a: &LabRunArgs) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(d) = a.duration {
        v.extend([
            "--duration".into(),
            humantime::format_duration(d).to_string(),
        ]);
    }
    if let Some(d) = a.warmup {
        v.extend(["--warmup".into(), humantime::format_duration(d).to_string()]);
    }
    if let Some(r) = a.repeat {
        v.extend(["--repeat".into(), r.to_string()]);
    } else {
        // Enough runs to judge a difference: 3 at least, unless told.
        v.extend([
            "--min-repeat".into(),
            a.min_repeat.unwrap_or(LAB_MIN_REPEAT).to_string(),
        ]);
    }
    if let Some(t) = &a.target_ci {
        v.extend(["--target-ci".into(), t.clone()]);
    }
    if let Some(m) = a.max_repeat {
        v.extend(["--max-repeat".into(), m.to_string()]);
    }
    if let Some(r) = a.retry_suspect {
        v.extend(["--retry-suspect".into(), r.to_string()]);
    }
    if let Some(m) = &a.max_loss {
        v.extend(["--max-loss".into(), m.clone()]);
    }
    v.extend(["--placement".into(), a.placement.to_string()]);
    v
}

pub(super) fn run(a: LabRunArgs, command_line: Vec<String>) -> anyhow::Result<ExitCode> {
    // A history that cannot be used is said before anything is brought up.
    if let Some(db) = &a.history {
        crate::history::open_history(db)?;
    }
    // Everything is checked before anything is created.
    let configs = catalog(a.file.as_deref())?
        .resolve_list(&a.configs.join(","))
        .map_err(lab_error)?;
    let base = base_config(a.base.as_deref(), configs.iter().map(|c| c.name.as_str()))?;
    let topologies = configs
        .iter()
        .map(|c| Topology::build(c, a.pairs))
        .collect::<Result<Vec<_>, _>>()
        .map_err(lab_error)?;
    let exe = std::env::current_exe().context("failed to find the linkperf executable")?;
    let planned_runs = check_suite(&exe, &a)?;
    let lab = preflight()?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| usage(format!("failed to create {}: {e}", a.out.display())))?;
    let dir = a
        .out
        .canonicalize()
        .with_context(|| format!("failed to resolve {}", a.out.display()))?;
    for t in &topologies {
        let (all, pairs) = result_files(&dir, &t.config.name, a.pairs);
        if a.resume {
            continue;
        }
        if let Some(f) = std::iter::once(&all).chain(&pairs).find(|f| f.exists()) {
            return Err(usage(format!(
                "{} exists: continue the lab run that wrote it with --resume, or choose another --out",
                f.display()
            )));
        }
    }
    // One lab run at a time on a host: a second waits for the first to take
    // its configurations down (their namespace names are the same, and
    // the first's load would be in the second's figures).
    let _one_run = lab
        .hold_for_run(|| {
            eprintln!(
                "linkperf lab: another lab run is measuring on this host; waiting for it to end"
            )
        })
        .map_err(lab_error)?;
    let Opened { lab, up, .. } = clean_stale(lab)?;
    if let Some(r) = up.iter().find(|r| configs.iter().any(|c| c.name == r.name)) {
        return Err(lab_error(LabError::AlreadyUp {
            name: r.name.clone(),
            detail: "brought up earlier".into(),
        }));
    }
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)
        .with_context(|| format!("failed to create {}", logs.display()))?;

    // Ctrl-C (or SIGTERM): the suites are interrupted, then the configuration
    // is taken down; a second one kills the suites at once.
    let interrupts = Arc::new(AtomicUsize::new(0));
    {
        let i = interrupts.clone();
        ctrlc::set_handler(move || {
            i.fetch_add(1, Ordering::AcqRel);
        })
        .context("failed to install the Ctrl-C handler")?;
    }

    let ctx = RunContext {
        exe: &exe,
        args: &a,
        dir: &dir,
        logs: &logs,
        interrupts: &interrupts,
        command_line: &command_line,
    };
    let (done, mut failures) = match a.order {
        Order::Interleaved if topologies.len() > 1 => {
            ctx.interleaved(&lab, &topologies, planned_runs)
        }
        _ => ctx.sequential(&lab, &topologies),
    };
    if interrupts.load(Ordering::Acquire) > 0 {
        eprintln!(
            "linkperf lab: interrupted; everything the lab brought up is down. Results so far are in {}; continue with: {}",
            dir.display(),
            crate::save::resume_command(&command_line, &a.out)
        );
        return Ok(ExitCode::from(1));
    }
    if let Err(e) = report(&exe, &dir, &done, base.as_deref()) {
        failures += 1;
        eprintln!("linkperf lab: error: {e:#}");
    }
    if failures > 0 {
        eprintln!(
            "linkperf lab: {} did not run cleanly; see above and {}",
            crate::table::count(failures as u64, "configuration"),
            logs.display()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

impl RunContext<'_> {
    /// One configuration after another: each brought up, run through with the
    /// whole suite, taken down. The configurations run and the failures.
    pub(super) fn sequential(
        &self,
        lab: &Lab<Host>,
        topologies: &[Topology],
    ) -> (Vec<(String, PathBuf)>, usize) {
        let mut done: Vec<(String, PathBuf)> = Vec::new();
        let mut failures = 0usize;
        for t in topologies {
            if self.interrupts.load(Ordering::Acquire) > 0 {
                break;
            }
            let name = &t.config.name;
            eprintln!("linkperf lab: {}: bringing it up", t.describe());
            let guard = match lab.up(t, lab.this_process()) {
                Ok(g) => g,
                Err(e) => {
                    failures += 1;
                    eprintln!("linkperf lab: error: failed to bring {name} up: {e}");
                    continue;
                }
            };
            let outcome = self.through(t);
            if let Err(e) = guard.down() {
                eprintln!("linkperf lab: error: failed to take {name} down: {e}");
                failures += 1;
            } else {
                eprintln!("linkperf lab: {name}: taken down");
            }
            match outcome {
                Ok(ok) => {
                    if !ok {
                        failures += 1;
                    }
                    done.push((name.clone(), self.dir.join(format!("{name}.json"))));
                }
                Err(e) => {
                    failures += 1;
                    eprintln!("linkperf lab: error: {name}: {e:#}");
                }
            }
        }
        (done, failures)
    }

    /// Every configuration up at once; run `k` of the suite's order on each
    /// configuration in turn, starting with configuration `k mod n` (ABC,
    /// BCA, CAB, ...), so that drift over the suite's minutes lands on every
    /// configuration alike.
    pub(super) fn interleaved(
        &self,
        lab: &Lab<Host>,
        topologies: &[Topology],
        planned_runs: usize,
    ) -> (Vec<(String, PathBuf)>, usize) {
        let mut failures = 0usize;
        let mut guards = Vec::new();
        for t in topologies {
            eprintln!("linkperf lab: {}: bringing it up", t.describe());
            match lab.up(t, lab.this_process()) {
                Ok(g) => guards.push(g),
                Err(e) => {
                    eprintln!(
                        "linkperf lab: error: failed to bring {} up: {e}",
                        t.config.name
                    );
                    for g in guards {
                        let _ = g.down();
                    }
                    return (Vec::new(), 1);
                }
            }
        }
        let mut running = Vec::new();
        let started = (|| -> anyhow::Result<()> {
            for t in topologies {
                let servers = Children(
                    t.pairs
                        .iter()
                        .map(|p| self.serve(&t.config.name, p))
                        .collect::<anyhow::Result<_>>()?,
                );
                running.push(servers);
            }
            Ok(())
        })();
        let n = topologies.len();
        if let Err(e) = started {
            eprintln!("linkperf lab: error: {e:#}");
            failures += 1;
        } else {
            eprintln!(
                "linkperf lab: running suite {} through {n} configurations at once, interleaved: {} each, every run on each configuration in turn",
                self.args.suite,
                crate::table::count(planned_runs as u64, "run")
            );
            // With --target-ci a configuration may need fewer runs than
            // planned: it says so, and the rounds end when all have.
            let mut finished = vec![false; n];
            'rounds: for k in 0..planned_runs {
                for j in 0..n {
                    if self.interrupts.load(Ordering::Acquire) > 0 {
                        break 'rounds;
                    }
                    let c = (k + j) % n;
                    if finished[c] {
                        continue;
                    }
                    let t = &topologies[c];
                    match self.step(t) {
                        Ok(Step::Ran) => {}
                        Ok(Step::Done) => finished[c] = true,
                        Ok(Step::Failed) => failures += 1,
                        Err(e) => {
                            failures += 1;
                            eprintln!("linkperf lab: error: {}: {e:#}", t.config.name);
                        }
                    }
                }
                if finished.iter().all(|f| *f) {
                    break;
                }
            }
        }
        drop(running);
        let mut done = Vec::new();
        if self.interrupts.load(Ordering::Acquire) == 0 {
            for t in topologies {
                match self.finish(t) {
                    Ok(()) => done.push((
                        t.config.name.clone(),
                        self.dir.join(format!("{}.json", t.config.name)),
                    )),
                    Err(e) => {
                        failures += 1;
                        eprintln!("linkperf lab: error: {}: {e:#}", t.config.name);
                    }
                }
            }
        }
        for (t, g) in topologies.iter().zip(guards) {
            if let Err(e) = g.down() {
                eprintln!(
                    "linkperf lab: error: failed to take {} down: {e}",
                    t.config.name
                );
                failures += 1;
            } else {
                eprintln!("linkperf lab: {}: taken down", t.config.name);
            }
        }
        (done, failures)
    }

    /// The next run of the suite through configuration `t` (its servers
    /// running): one `linkperf suite --step 1` per pair, at once. True when
    /// every pair's run went without failure.
    pub(super) fn step(&self, t: &Topology) -> anyhow::Result<Step> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let (_, files) = result_files(self.dir, name, n);
        let mut suites = Children(Vec::new());
        for (p, file) in t.pairs.iter().zip(&files) {
            suites
                .0
                .push(self.suite_with(name, p, file, n, &["--resume", "--step", "1"])?);
        }
        let codes = self.wait_codes(&mut suites.0)?;
        let done = i32::from(crate::suite::STEP_NOTHING_LEFT);
        Ok(if codes.iter().all(|c| *c == Some(done)) {
            Step::Done
        } else if codes.iter().all(|c| *c == Some(0) || *c == Some(done)) {
            Step::Ran
        } else {
            Step::Failed
        })
    }

    /// After the last run: the pairs' aggregate and the link records.
    pub(super) fn finish(&self, t: &Topology) -> anyhow::Result<()> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let (all, files) = result_files(self.dir, name, n);
        if let Some(missing) = files.iter().find(|f| !f.exists()) {
            anyhow::bail!(
                "no results were written ({}); see {}",
                missing.display(),
                self.logs.display()
            );
        }
        self.record(t, &all, &files)
    }
}

impl RunContext<'_> {
    /// Runs the suite through the configuration that is up; records the link.
    /// `Ok(false)`: it ran, but some suite reported failures.
    pub(super) fn through(&self, t: &Topology) -> anyhow::Result<bool> {
        let name = &t.config.name;
        let n = t.pairs.len() as u32;
        let servers = Children(
            t.pairs
                .iter()
                .map(|p| self.serve(name, p))
                .collect::<anyhow::Result<_>>()?,
        );
        let (_, files) = result_files(self.dir, name, n);
        let mut suites = Children(Vec::new());
        for (p, file) in t.pairs.iter().zip(&files) {
            // Resuming, a file that was started goes on where it stopped.
            let resume: &[&str] = if self.args.resume && file.exists() {
                &["--resume"]
            } else {
                &[]
            };
            suites.0.push(self.suite_with(name, p, file, n, resume)?);
        }
        eprintln!(
            "linkperf lab: {name}: running suite {} over {}",
            self.args.suite,
            crate::table::count(n as u64, "pair")
        );
        let ok = self.wait(&mut suites.0)?;
        drop(servers);
        self.finish(t)?;
        Ok(ok)
    }

    /// The results of configuration `t`'s pairs (`files`) aggregated into
    /// `all` when there are several, and the link recorded in each.
    pub(super) fn record(&self, t: &Topology, all: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
        let name = &t.config.name;
        // How the configuration is, while it is still up: its links, queues
        // (their counters after the tests), offloads and sysctls.
        let namespaces = linkperf_lab::snapshot(&Host, t);
        if files.len() > 1 {
            let docs = files
                .iter()
                .map(|f| ResultsDocument::load(f))
                .collect::<Result<Vec<_>, _>>()
                .context("failed to read a pair's results")?;
            let labels: Vec<String> = (1..=docs.len()).map(|k| format!("pair{k}")).collect();
            let agg = aggregate(name, self.command_line, &docs, &labels)?;
            agg.save(all)
                .with_context(|| format!("failed to write {}", all.display()))?;
            for f in files {
                LinkRecord::for_pair(t)
                    .with_context(self.command_line, namespaces.clone())
                    .add_to_file(f)?;
            }
            // Their suites ran quietly into logs: each pair's figures and the sum here.
            crate::emit(&linkperf_lab::pairs_table(name, &agg, &docs))?;
        }
        LinkRecord::for_all(t)
            .with_context(self.command_line, namespaces)
            .add_to_file(all)?;
        if let Some(db) = &self.args.history {
            let doc = ResultsDocument::load(all)
                .with_context(|| format!("failed to read {}", all.display()))?;
            crate::history::Recorder::later(db).record(&doc, all);
        }
        eprintln!("linkperf lab: {name}: results in {}", all.display());
        Ok(())
    }

    /// `linkperf serve` inside pair `p`'s server namespace, once it listens.
    pub(super) fn serve(&self, name: &str, p: &Pair) -> anyhow::Result<Child> {
        let log = self.logs.join(format!("{name}-serve{}.log", p.index));
        let mut cmd = netns_command(
            &p.server_ns,
            self.exe,
            &["serve".into(), "--listen".into(), p.server_addr.to_string()],
        );
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                File::create(&log)
                    .with_context(|| format!("failed to create {}", log.display()))?,
            )
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("failed to start linkperf serve in {}", p.server_ns))?;
        let deadline = Instant::now() + SERVE_READY;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("listening on") {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                anyhow::bail!(
                    "linkperf serve in {} exited ({status}): {}",
                    p.server_ns,
                    text.trim()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!(
                    "linkperf serve in {} did not listen within {SERVE_READY:?}: {}",
                    p.server_ns,
                    text.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `linkperf suite` inside pair `p`'s client namespace, writing `file`,
    /// with `extra` arguments.
    pub(super) fn suite_with(
        &self,
        name: &str,
        p: &Pair,
        file: &Path,
        pairs: u32,
        extra: &[&str],
    ) -> anyhow::Result<Child> {
        let label = if pairs > 1 {
            format!("{name}-pair{}", p.index)
        } else {
            name.to_string()
        };
        let mut args: Vec<String> = vec![
            "suite".into(),
            self.args.suite.clone(),
            "--server".into(),
            p.server_addr.to_string(),
            "--out".into(),
            file.display().to_string(),
            "--label".into(),
            label.clone(),
            // The lab says how to continue, not each suite.
            "--by-lab".into(),
        ];
        args.extend(suite_options(self.args));
        args.extend(extra.iter().map(|a| a.to_string()));
        if pairs > 1 {
            args.push("--quiet".into());
            // The pairs load one host together: each pair's host noise is the
            // others' traffic, judged on the aggregate; and a retry would put
            // one pair out of step with the others.
            args.push("--shared-host".into());
        }
        let mut cmd = netns_command(&p.client_ns, self.exe, &args);
        cmd.stdin(Stdio::null()).process_group(0);
        if pairs > 1 {
            // One log per pair: on the terminal they would interleave.
            let log = self.logs.join(format!("{label}.log"));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .with_context(|| format!("failed to create {}", log.display()))?;
            cmd.stdout(f.try_clone()?).stderr(f);
        }
        cmd.spawn()
            .with_context(|| format!("failed to start linkperf suite in {}", p.client_ns))
    }

    /// Waits for every suite; forwards Ctrl-C to them once, kills them on a
    /// second. True when all exited 0.
    pub(super) fn wait(&self, suites: &mut [Child]) -> anyhow::Result<bool> {
        Ok(self.wait_codes(suites)?.iter().all(|c| *c == Some(0)))
    }

    /// [`wait`](Self::wait), with each suite's exit code (`None`: a signal).
    pub(super) fn wait_codes(&self, suites: &mut [Child]) -> anyhow::Result<Vec<Option<i32>>> {
        let mut forwarded = 0;
        let mut status = vec![None; suites.len()];
        loop {
            for (c, s) in suites.iter_mut().zip(status.iter_mut()) {
                if s.is_none() {
                    *s = c.try_wait().context("failed to wait for a suite")?;
                }
            }
            if status.iter().all(Option::is_some) {
                return Ok(status.iter().flatten().map(|s| s.code()).collect());
            }
            let seen = self.interrupts.load(Ordering::Acquire);
            if seen > forwarded {
                for (c, s) in suites.iter_mut().zip(&status) {
                    if s.is_none() {
                        if seen == 1 {
                            let _ = interrupt(c.id());
                        } else {
                            let _ = c.kill();
                        }
                    }
                }
                forwarded = seen;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// `linkperf suite SUITE --dry-run` with the user's options: a wrong suite or
/// option is a usage error before anything is brought up.
/// Returns how many runs the suite's order has.
pub(super) fn check_suite(exe: &Path, a: &LabRunArgs) -> anyhow::Result<usize> {
    let out = Command::new(exe)
        .args(["suite", &a.suite, "--dry-run"])
        .args(suite_options(a))
        .stdin(Stdio::null())
        .output()
        .context("failed to run linkperf suite --dry-run")?;
    if out.status.success() {
        // "N tests × R runs = T runs, ..."
        let text = String::from_utf8_lossy(&out.stdout);
        return text
            .lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(" = ")?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .ok_or_else(|| {
                anyhow::anyhow!("linkperf suite --dry-run did not say how many runs: {text}")
            });
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(usage(format!(
        "suite {} cannot run: {}",
        a.suite,
        err.trim().trim_start_matches("linkperf: error: ")
    )))
}

pub(super) struct RunContext<'a> {
    exe: &'a Path,
    args: &'a LabRunArgs,
    dir: &'a Path,
    logs: &'a Path,
    interrupts: &'a AtomicUsize,
    command_line: &'a [String],
}

/// Children killed when dropped (servers, or suites on an error path).
pub(super) struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The configuration `--base` names, checked against the configurations'
/// `names` before anything runs.
pub(super) fn base_config<'a>(
    base: Option<&str>,
    names: impl Iterator<Item = &'a str> + Clone,
) -> anyhow::Result<Option<String>> {
    let Some(base) = base else { return Ok(None) };
    if names.clone().any(|n| n == base) {
        return Ok(Some(base.to_string()));
    }
    Err(usage(format!(
        "--base {base} is not one of --configs ({})",
        names.collect::<Vec<_>>().join(", ")
    )))
}

/// The comparison: `linkperf compare` when this build has it and there are at
/// least two configurations, else a plain table. The base is `base` when
/// given, else the first configuration; a base without results leaves a
/// plain table (the others are not compared against another base unasked).
pub(super) fn report(
    exe: &Path,
    dir: &Path,
    done: &[(String, PathBuf)],
    base: Option<&str>,
) -> anyhow::Result<()> {
    let mut done: Vec<&(String, PathBuf)> = done.iter().filter(|(_, f)| f.exists()).collect();
    if done.is_empty() {
        return Ok(());
    }
    let mut comparable = true;
    if let Some(base) = base {
        match done.iter().position(|(n, _)| n == base) {
            Some(i) => {
                let b = done.remove(i);
                done.insert(0, b);
            }
            None => {
                eprintln!("linkperf lab: the base {base} has no results: no comparison, a plain table instead:");
                comparable = false;
            }
        }
    }
    let has_compare = Command::new(exe)
        .args(["compare", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if comparable && has_compare && done.len() >= 2 {
        let out = dir.join("report");
        let status = Command::new(exe)
            .arg("compare")
            .args(done.iter().map(|(_, f)| f))
            .arg("--base")
            .arg(&done[0].1)
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .status()
            .context("failed to run linkperf compare")?;
        if status.success() {
            eprintln!(
                "linkperf lab: comparison (base {}) in {}",
                done[0].0,
                out.join("index.html").display()
            );
            return Ok(());
        }
        eprintln!("linkperf lab: linkperf compare failed ({status}); a plain table instead:");
    }
    let docs = done
        .iter()
        .map(|(n, f)| {
            ResultsDocument::load(f)
                .map(|d| (n.clone(), d))
                .with_context(|| format!("failed to read {}", f.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    crate::emit(&linkperf_lab::throughput_table(&docs))?;
    Ok(())
}
