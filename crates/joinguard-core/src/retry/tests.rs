//! Runner, schedule and budget tests. Timing runs on tokio's paused clock (no real sleeps),
//! except the wake-on-connect test, which needs a real listener and real time.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

fn api(status: u16, reason: &str, message: &str) -> ApiCallError {
    let body = serde_json::json!({"kind": "Status", "reason": reason, "message": message});
    ApiCallError::Status(ApiError::from_response(
        status,
        None,
        body.to_string().as_bytes(),
    ))
}

fn unavailable() -> ApiCallError {
    api(503, "ServiceUnavailable", "")
}

fn all_policies() -> [RetryPolicy; 4] {
    [
        RetryPolicy::write(),
        RetryPolicy::read(),
        RetryPolicy::connect(),
        RetryPolicy::etcd(),
    ]
}

#[test]
fn policies_match_design() {
    let rows = [
        (RetryPolicy::write(), 500, 0.4, 40),
        (RetryPolicy::read(), 250, 0.1, 15),
        (RetryPolicy::connect(), 250, 0.1, 15),
        (RetryPolicy::etcd(), 500, 0.2, 120),
    ];
    for (p, start_ms, jitter, budget_s) in rows {
        assert_eq!(
            p.backoff.start,
            Duration::from_millis(start_ms),
            "{}",
            p.kind
        );
        assert_eq!(p.backoff.factor, 1.5, "{}", p.kind);
        assert_eq!(p.backoff.jitter, jitter, "{}", p.kind);
        assert_eq!(p.budget, Duration::from_secs(budget_s), "{}", p.kind);
        assert!(p.per_attempt <= Duration::from_secs(10));
    }
}

#[test]
fn schedules_grow_within_jitter_bounds() {
    for p in all_policies() {
        for seed in 0..20 {
            let b = p.backoff;
            let steps: Vec<Duration> = b.schedule_seeded(seed).take(12).collect();
            assert_eq!(steps.len(), 12);
            let mut base = b.start.as_secs_f64();
            for (i, d) in steps.iter().enumerate() {
                let capped = base.min(b.max_delay.as_secs_f64());
                let d = d.as_secs_f64();
                let eps = 1e-3;
                assert!(
                    d >= capped - eps && d <= capped * (1.0 + b.jitter) + eps,
                    "{} step {i}: {d} not in [{capped}, {}]",
                    p.kind,
                    capped * (1.0 + b.jitter)
                );
                base *= 1.5;
            }
        }
        // Jitter is really applied: not every seed gives the un-jittered first step.
        let firsts: Vec<Duration> = (0..10)
            .map(|s| p.backoff.schedule_seeded(s).next().unwrap())
            .collect();
        assert!(firsts.iter().any(|d| *d != p.backoff.start), "{}", p.kind);
    }
}

#[tokio::test(start_paused = true)]
async fn budget_is_never_exceeded() {
    for p in all_policies() {
        let rec = Recorder::new();
        let t0 = Instant::now();
        let r: Result<(), _> = run(&p, "always-503", &rec, None, |_| async {
            Err(unavailable())
        })
        .await;
        let err = r.unwrap_err();
        let took = t0.elapsed();
        assert!(took <= p.budget, "{}: {took:?} > {:?}", p.kind, p.budget);
        // The last sleep is shortened, so the budget is used, not wasted.
        assert!(
            took + MIN_ATTEMPT_WINDOW + Duration::from_millis(1) >= p.budget,
            "{}: {took:?}",
            p.kind
        );
        assert_eq!(err.gave_up, GaveUp::BudgetExhausted);
        let records = rec.records();
        assert_eq!(records.len() as u32, err.attempts);
        let slept: Duration = records.iter().filter_map(|r| r.delay_before_next).sum();
        assert!(slept <= p.budget);
        assert!(records.last().unwrap().gave_up);
        assert_eq!(
            rec.count("always-503", ClassLabel::Transient),
            u64::from(err.attempts)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn budget_exhaustion_message_and_records() {
    let rec = Recorder::new();
    let t0 = Instant::now();
    let r: Result<(), _> = run(
        &RetryPolicy::write(),
        "kube-system/kubeadm-config update",
        &rec,
        None,
        |_| async { Err(unavailable()) },
    )
    .await;
    let err = r.unwrap_err();
    assert!(t0.elapsed() <= Duration::from_secs(40));
    assert!(err.attempts >= 8, "{}", err.attempts);
    assert!(err.budget_exhausted());
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "kube-system/kubeadm-config update: gave up after {} attempts in ",
            err.attempts
        )),
        "{msg}"
    );
    assert!(
        msg.contains("(write budget 40 s); last error: 503 Service Unavailable"),
        "{msg}"
    );
    let json = serde_json::to_value(&rec).unwrap();
    assert_eq!(json.as_array().unwrap().len() as u32, err.attempts);
    assert_eq!(json[0]["class"], "transient");
    assert_eq!(json[0]["op"], "kube-system/kubeadm-config update");
}

#[tokio::test(start_paused = true)]
async fn hanging_attempt_is_cut_off() {
    let calls = AtomicU32::new(0);
    let rec = Recorder::new();
    let p = RetryPolicy::read().with_per_attempt(Duration::from_secs(2));
    let t0 = Instant::now();
    let r = run(&p, "hang-once", &rec, None, |ctx| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            assert_eq!(ctx.timeout, Duration::from_secs(2));
            if n == 0 {
                std::future::pending::<()>().await;
            }
            Ok::<_, ApiCallError>(ctx.attempt)
        }
    })
    .await;
    assert_eq!(r.unwrap(), 2);
    assert!(t0.elapsed() >= Duration::from_secs(2));
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(rec.records()[0].reason, Some(Reason::AttemptTimeout));
}

#[tokio::test(start_paused = true)]
async fn hanging_attempts_end_within_budget_plus_one_attempt() {
    let rec = Recorder::new();
    let p = RetryPolicy::write();
    let t0 = Instant::now();
    let r: Result<(), _> = run(&p, "hang", &rec, None, |_| async {
        std::future::pending::<Result<(), ApiCallError>>().await
    })
    .await;
    let err = r.unwrap_err();
    assert!(t0.elapsed() <= p.budget + p.per_attempt);
    assert!(matches!(err.last, Failure::AttemptTimeout(_)));
    assert!(err.to_string().contains("no answer within the"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_a_floor() {
    let times = Mutex::new(Vec::new());
    let rec = Recorder::new();
    let r = run(&RetryPolicy::write(), "rate-limited", &rec, None, |ctx| {
        times.lock().unwrap().push(Instant::now());
        async move {
            if ctx.attempt == 1 {
                let body = br#"{"kind":"Status","reason":"TooManyRequests","code":429}"#;
                Err(ApiCallError::Status(ApiError::from_response(
                    429,
                    Some("2"),
                    body,
                )))
            } else {
                Ok(())
            }
        }
    })
    .await;
    r.unwrap();
    let t = times.lock().unwrap();
    assert_eq!(t.len(), 2);
    assert!(t[1] - t[0] >= Duration::from_secs(2), "{:?}", t[1] - t[0]);
    assert_eq!(
        rec.records()[0].delay_before_next,
        Some(Duration::from_secs(2))
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_budget_fails_now() {
    let rec = Recorder::new();
    let t0 = Instant::now();
    let r: Result<(), _> = run(
        &RetryPolicy::read(),
        "kube-system/kubeadm-config get",
        &rec,
        None,
        |_| async {
            Err(ApiCallError::Status(ApiError::from_response(
                429,
                Some("60"),
                b"",
            )))
        },
    )
    .await;
    let err = r.unwrap_err();
    assert_eq!(err.attempts, 1);
    assert!(t0.elapsed() < Duration::from_millis(10));
    assert!(matches!(err.gave_up, GaveUp::RetryAfterBeyondBudget { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("the server asked to retry after 60 s"),
        "{msg}"
    );
    assert!(msg.contains("left of the read budget 15 s"), "{msg}");
}

#[tokio::test(start_paused = true)]
async fn permanent_and_trust_make_one_attempt() {
    let cases: Vec<(ApiCallError, &str)> = vec![
        (
            api(
                403,
                "Forbidden",
                "configmaps \"kubeadm-config\" is forbidden",
            ),
            "403 Forbidden",
        ),
        (
            api(422, "Invalid", "data: Invalid value"),
            "422 Unprocessable Entity",
        ),
        (api(400, "BadRequest", "bad"), "400 Bad Request"),
        (api(401, "Unauthorized", ""), "401 Unauthorized"),
        (
            ApiCallError::Transport(TransportError::Tls(
                "invalid peer certificate: UnknownIssuer".into(),
            )),
            "trust failure",
        ),
    ];
    for (e, cause) in cases {
        let calls = AtomicU32::new(0);
        let rec = Recorder::new();
        let e = Arc::new(e);
        let r: Result<(), _> = run(
            &RetryPolicy::write(),
            "kube-system/kubeadm-config update",
            &rec,
            None,
            |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                let e = (*e).clone();
                async move { Err(e) }
            },
        )
        .await;
        let err = r.unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{cause}");
        assert_eq!(err.attempts, 1);
        assert_eq!(err.gave_up, GaveUp::NotRetryable);
        let msg = err.to_string();
        assert!(
            msg.starts_with("kube-system/kubeadm-config update: "),
            "{msg}"
        );
        assert!(msg.contains(cause), "{msg}");
        assert_eq!(rec.records().len(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn transient_then_success() {
    let rec = Recorder::new();
    let r = run(
        &RetryPolicy::write(),
        "flaky",
        &rec,
        None,
        |ctx| async move {
            match ctx.attempt {
                1 => Err(api(500, "InternalError", "etcdserver: leader changed")),
                2 => Err(ApiCallError::Transport(TransportError::GoAway(
                    "NO_ERROR".into(),
                ))),
                3 => Err(api(502, "", "")),
                _ => Ok("done"),
            }
        },
    )
    .await;
    assert_eq!(r.unwrap(), "done");
    let recs = rec.records();
    assert_eq!(recs.len(), 4);
    assert_eq!(recs[0].reason, Some(Reason::EtcdLeaderChanged));
    assert_eq!(recs[1].reason, Some(Reason::GoAway));
    assert_eq!(recs[3].class, ClassLabel::Ok);
    assert_eq!(rec.count("flaky", ClassLabel::Transient), 3);
}

#[tokio::test(start_paused = true)]
async fn conflict_in_plain_run_is_not_blindly_retried() {
    let rec = Recorder::new();
    let r: Result<(), _> = run(&RetryPolicy::write(), "node patch", &rec, None, |_| async {
        Err(api(409, "Conflict", "the object has been modified"))
    })
    .await;
    let err = r.unwrap_err();
    assert_eq!(err.attempts, 1);
    assert_eq!(err.gave_up, GaveUp::ConflictWithoutMutation);
}

/// A stand-in for one ConfigMap with a resourceVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Obj {
    rv: u64,
    data: BTreeMap<String, String>,
}

#[tokio::test(start_paused = true)]
async fn conflict_rereads_and_reapplies() {
    let server = Arc::new(Mutex::new(Obj {
        rv: 1,
        data: BTreeMap::from([("ClusterConfiguration".to_string(), "keep".to_string())]),
    }));
    let gets = AtomicU32::new(0);
    let updates = AtomicU32::new(0);
    let rec = Recorder::new();
    let t0 = Instant::now();
    let m = run_mutation(
        &RetryPolicy::write(),
        "kube-system/kubeadm-config update",
        &rec,
        None,
        || {
            gets.fetch_add(1, Ordering::SeqCst);
            let o = server.lock().unwrap().clone();
            async move { Ok::<_, ApiCallError>(o) }
        },
        |o: &mut Obj| {
            if o.data.get("node-a").map(String::as_str) == Some("10.0.0.1:6443") {
                return Ok(Changed::No);
            }
            o.data.insert("node-a".into(), "10.0.0.1:6443".into());
            Ok(Changed::Yes)
        },
        |o: Obj| {
            let n = updates.fetch_add(1, Ordering::SeqCst);
            let server = server.clone();
            async move {
                let mut s = server.lock().unwrap();
                // Another joiner writes between our read and our write, twice.
                if n < 2 {
                    s.rv += 1;
                    s.data.insert(format!("node-other-{n}"), "x".into());
                }
                if o.rv != s.rv {
                    return Err(api(409, "Conflict", "the object has been modified"));
                }
                s.rv += 1;
                s.data = o.data;
                Ok(s.clone())
            }
        },
    )
    .await
    .unwrap();
    assert!(m.changed);
    assert_eq!(m.conflicts, 2);
    assert_eq!(gets.load(Ordering::SeqCst), 3);
    assert_eq!(updates.load(Ordering::SeqCst), 3);
    assert_eq!(m.attempts, 6);
    // Both concurrent changes and ours, and the untouched key.
    let final_obj = server.lock().unwrap().clone();
    assert_eq!(final_obj, m.object);
    for key in [
        "ClusterConfiguration",
        "node-a",
        "node-other-0",
        "node-other-1",
    ] {
        assert!(
            final_obj.data.contains_key(key),
            "{key} missing: {final_obj:?}"
        );
    }
    // Conflicts sleep only a little jitter, not a backoff step.
    assert!(t0.elapsed() <= CONFLICT_JITTER * 2);
    assert_eq!(
        rec.count("kube-system/kubeadm-config update", ClassLabel::Conflict),
        2
    );

    // Idempotence: a second run reads once and writes nothing.
    let m2 = run_mutation(
        &RetryPolicy::write(),
        "again",
        &rec,
        None,
        || {
            let o = server.lock().unwrap().clone();
            async move { Ok::<_, ApiCallError>(o) }
        },
        |o: &mut Obj| {
            Ok(if o.data.contains_key("node-a") {
                Changed::No
            } else {
                Changed::Yes
            })
        },
        |_o: Obj| async { Err(api(500, "", "must not be called")) },
    )
    .await
    .unwrap();
    assert!(!m2.changed);
    assert_eq!(m2.attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn mutation_after_transient_update_rereads() {
    // An update that landed but whose answer was lost (EOF): the re-read sees it, and the
    // mutation reports nothing left to do.
    let server = Arc::new(Mutex::new(0u32));
    let rec = Recorder::new();
    let m = run_mutation(
        &RetryPolicy::write(),
        "counter",
        &rec,
        None,
        || {
            let v = *server.lock().unwrap();
            async move { Ok::<_, ApiCallError>(v) }
        },
        |v: &mut u32| {
            Ok(if *v == 1 {
                Changed::No
            } else {
                *v = 1;
                Changed::Yes
            })
        },
        |v: u32| {
            let server = server.clone();
            async move {
                *server.lock().unwrap() = v;
                Err(ApiCallError::Transport(TransportError::Eof))
            }
        },
    )
    .await
    .unwrap();
    assert!(!m.changed);
    assert_eq!(m.object, 1);
    assert_eq!(m.attempts, 3);
}

#[tokio::test(start_paused = true)]
async fn mutate_error_stops_at_once() {
    let rec = Recorder::new();
    let r = run_mutation(
        &RetryPolicy::write(),
        "kube-system/kubeadm-config update",
        &rec,
        None,
        || async { Ok::<_, ApiCallError>(()) },
        |_: &mut ()| {
            Err(ApiCallError::Transport(TransportError::Other(
                "ClusterStatus has no apiEndpoints".into(),
            )))
        },
        |_: ()| async { Ok(()) },
    )
    .await;
    let err = r.unwrap_err();
    assert_eq!(err.gave_up, GaveUp::MutateFailed);
    assert_eq!(err.attempts, 1);
    assert!(
        err.to_string().contains("could not apply the change"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn not_found_is_what_the_call_site_says() {
    let rec = Recorder::new();
    let calls = AtomicU32::new(0);
    let get = RetryPolicy::read().on_not_found(NotFound::Answer);
    let r: Result<(), _> = run(&get, "role get", &rec, None, |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err(api(404, "NotFound", "roles \"x\" not found")) }
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(found(r).unwrap(), None);

    // Waiting for an object to appear: 404 is transient.
    let wait = RetryPolicy::read().on_not_found(NotFound::Transient);
    let r = run(&wait, "node get", &rec, None, |ctx| async move {
        if ctx.attempt < 3 {
            Err(api(404, "NotFound", "nodes \"a\" not found"))
        } else {
            Ok(ctx.attempt)
        }
    })
    .await;
    assert_eq!(r.unwrap(), 3);

    // On an update (the default), 404 is permanent.
    let r: Result<(), _> = run(
        &RetryPolicy::write(),
        "role update",
        &rec,
        None,
        |_| async { Err(api(404, "NotFound", "")) },
    )
    .await;
    let err = r.unwrap_err();
    assert_eq!((err.attempts, err.gave_up), (1, GaveUp::NotRetryable));
}

#[test]
fn v1beta4_budgets_override() {
    let b = Budgets::from_v1beta4(Some(Duration::from_secs(90)), Some(Duration::from_secs(30)));
    assert_eq!(b.write().budget, Duration::from_secs(90));
    assert_eq!(b.read().budget, Duration::from_secs(90));
    assert_eq!(b.connect().budget, Duration::from_secs(90));
    assert_eq!(b.etcd().budget, Duration::from_secs(30));
    // Schedules are untouched.
    assert_eq!(b.write().backoff, RetryPolicy::write().backoff);
    let none = Budgets::from_v1beta4(None, None);
    assert_eq!(none.write(), RetryPolicy::write());
    assert_eq!(none.etcd(), RetryPolicy::etcd());
    // A zero override still allows one attempt.
    let zero = Budgets::from_v1beta4(Some(Duration::ZERO), None);
    assert_eq!(zero.read().budget, MIN_BUDGET);
}

#[tokio::test(start_paused = true)]
async fn budget_override_and_deadline_shorten_the_run() {
    let rec = Recorder::new();
    let p = RetryPolicy::write().with_budget(Duration::from_secs(5));
    let t0 = Instant::now();
    let r: Result<(), _> = run(&p, "short", &rec, None, |ctx| async move {
        assert!(ctx.timeout <= Duration::from_secs(5));
        Err(unavailable())
    })
    .await;
    assert!(r.unwrap_err().to_string().contains("(write budget 5 s)"));
    assert!(t0.elapsed() <= Duration::from_secs(5));

    let p = RetryPolicy::etcd().with_deadline(Instant::now() + Duration::from_secs(3));
    let t0 = Instant::now();
    let r: Result<(), _> = run(&p, "deadline", &rec, None, |_| async { Err(unavailable()) }).await;
    assert!(r.is_err());
    assert!(t0.elapsed() <= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn wait_until_checks_until_ready() {
    let mut seen = Vec::new();
    let t0 = Instant::now();
    let r = wait_until(
        &Backoff::PREFLIGHT_WAIT,
        Instant::now() + Duration::from_secs(300),
        |n| async move {
            if n < 4 {
                Err(format!("p99 high ({n})"))
            } else {
                Ok(n)
            }
        },
        |p| seen.push((p.attempt, p.not_yet.clone(), p.next_in)),
    )
    .await;
    assert_eq!(r.unwrap(), 4);
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].1, "p99 high (1)");
    assert!(seen.iter().all(|s| s.2.is_some()));
    // 1 s, 1.5 s, 2.25 s, each jittered by at most 20 %.
    let slept = t0.elapsed().as_secs_f64();
    assert!((4.75..=4.75 * 1.2 + 0.01).contains(&slept), "{slept}");
}

#[tokio::test(start_paused = true)]
async fn wait_until_gives_up_at_the_deadline() {
    let t0 = Instant::now();
    let r: Result<(), WaitTimedOut<String>> = wait_until(
        &Backoff::PREFLIGHT_WAIT,
        Instant::now() + Duration::from_secs(20),
        |_| async { Err("loss 3 %".to_string()) },
        |_| {},
    )
    .await;
    let e = r.unwrap_err();
    assert!(t0.elapsed() <= Duration::from_secs(20));
    assert!(e.checks >= 4);
    assert!(e.to_string().ends_with(": loss 3 %"), "{e}");
    // A check that hangs is cut at the deadline.
    let r: Result<(), WaitTimedOut<String>> = wait_until(
        &Backoff::PREFLIGHT_WAIT,
        Instant::now() + Duration::from_secs(5),
        |_| std::future::pending(),
        |_| {},
    )
    .await;
    assert!(r.unwrap_err().last.is_none());
}

/// Real time: a listener appears 1.2 s into a blackout of "refused"; the runner, sleeping a 5 s
/// step, retries within ~300 ms of it.
#[tokio::test]
async fn wake_on_connect_ends_a_long_sleep() {
    let addr = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let opened = Arc::new(Mutex::new(None::<std::time::Instant>));
    let opened_w = opened.clone();
    let server = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let l = tokio::net::TcpListener::bind(addr).await.unwrap();
        *opened_w.lock().unwrap() = Some(std::time::Instant::now());
        tokio::time::sleep(Duration::from_secs(3)).await;
        drop(l);
    });
    let policy = RetryPolicy::connect().with_backoff(Backoff {
        start: Duration::from_secs(5),
        factor: 1.5,
        jitter: 0.0,
        max_delay: Duration::from_secs(10),
    });
    let wake = WakeOnConnect::new(addr);
    let rec = Recorder::new();
    let t0 = std::time::Instant::now();
    let r = run(&policy, "apiserver connect", &rec, Some(&wake), |_| async {
        tokio::net::TcpStream::connect(addr)
            .await
            .map(drop)
            .map_err(|e: io::Error| ApiCallError::Transport(TransportError::from_io(&e)))
    })
    .await;
    let done = std::time::Instant::now();
    r.unwrap();
    let opened_at = opened.lock().unwrap().expect("listener opened");
    let lag = done.duration_since(opened_at);
    assert!(
        lag < Duration::from_millis(300),
        "woke {lag:?} after the listener appeared"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
    let recs = rec.records();
    assert_eq!(recs[0].reason, Some(Reason::ConnectionRefused));
    assert_eq!(recs[0].delay_before_next, Some(Duration::from_secs(5)));
    server.abort();
}

/// Real time: the first attempt gets no answer (its endpoint refuses: dark); the second starts
/// while it is still dark and hangs on its connection, as a SYN sent into a blackout does. When
/// the endpoint accepts again 400 ms into that attempt, the watcher abandons it at once (it
/// watches from the start after a failed attempt, not after `IN_FLIGHT_GRACE`), and the third
/// attempt completes: within 300 ms of the return, where the grace alone would take 600 ms more.
#[tokio::test]
async fn an_attempt_started_in_the_dark_is_abandoned_when_the_path_returns() {
    let addr = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let opened = Arc::new(Mutex::new(None::<std::time::Instant>));
    let policy = RetryPolicy::connect()
        .with_per_attempt(Duration::from_secs(3))
        .with_backoff(Backoff {
            start: Duration::from_millis(100),
            factor: 1.0,
            jitter: 0.0,
            max_delay: Duration::from_millis(100),
        });
    let wake = WakeOnConnect::new(addr);
    let rec = Recorder::new();
    let opened_r = opened.clone();
    let r = run(&policy, "etcd MemberPromote", &rec, Some(&wake), |ctx| {
        let opened = opened_r.clone();
        async move {
            match ctx.attempt {
                1 => Err(ApiCallError::Transport(TransportError::from_io(
                    &io::Error::from(io::ErrorKind::ConnectionRefused),
                ))),
                2 => {
                    // Still dark for 400 ms, then the endpoint returns; this attempt's own
                    // connection stays stuck (its SYN went into the dark).
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    let l = tokio::net::TcpListener::bind(addr).await.unwrap();
                    *opened.lock().unwrap() = Some(std::time::Instant::now());
                    std::mem::forget(l);
                    std::future::pending().await
                }
                _ => Ok(()),
            }
        }
    })
    .await;
    let done = std::time::Instant::now();
    r.unwrap();
    let opened_at = opened.lock().unwrap().expect("listener opened");
    let lag = done.duration_since(opened_at);
    assert!(
        lag < Duration::from_millis(300),
        "done {lag:?} after the endpoint returned"
    );
    let recs = rec.records();
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert_eq!(recs[1].reason, Some(Reason::PathRecovered), "{recs:?}");
}

#[tokio::test(start_paused = true)]
async fn watcher_is_not_armed_after_http_errors() {
    // A listener that is up: if the watcher ran after a 503 it would see "up" at once; the
    // runner must sleep the full step instead (and on the paused clock, that is exact).
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let wake = WakeOnConnect::new(l.local_addr().unwrap());
    let policy = RetryPolicy::write().with_backoff(Backoff {
        start: Duration::from_secs(3),
        factor: 1.5,
        jitter: 0.0,
        max_delay: Duration::from_secs(10),
    });
    let rec = Recorder::new();
    let t0 = Instant::now();
    run(
        &policy,
        "503 then ok",
        &rec,
        Some(&wake),
        |ctx| async move {
            if ctx.attempt == 1 {
                Err(unavailable())
            } else {
                Ok(())
            }
        },
    )
    .await
    .unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(3));
}
