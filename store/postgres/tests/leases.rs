//! Leases and fencing between two processes' stores over one database.

use std::time::{Duration, Instant};

use docket_store::{EventStore, NewEvent, StoreError, StreamId, WallTime};
use docket_store_postgres::{
    DEFAULT_PRIORITY_AGING as AGING, Holder, Lease, PostgresConfig, PostgresStore, RunPriority,
    TestCluster,
};

fn ev(payload: &[u8]) -> NewEvent {
    NewEvent {
        kind: "k".into(),
        kind_version: 1,
        recorded_at: WallTime(1),
        policy: None,
        payload: payload.to_vec(),
    }
}

async fn two_stores() -> Option<(PostgresStore, PostgresStore)> {
    let cluster = TestCluster::shared()?;
    let db = cluster.database();
    let a = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .unwrap();
    let b = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .unwrap();
    Some((a, b))
}

/// Claims until one is granted (a lapsed lease becomes claimable by the database's clock).
async fn claim_within(store: &PostgresStore, holder: &Holder, lease: Duration) -> Lease {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut got = store.claim(holder, 1, lease, AGING).await.unwrap();
        if let Some(l) = got.pop() {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "no lease was granted within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_under_a_lapsed_claim_is_refused_and_the_new_holder_goes_on() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let run = StreamId::new("run-1").unwrap();
    a.append(&run, 0, vec![ev(b"requested")]).await.unwrap();
    a.enqueue(&run, RunPriority::Normal).await.unwrap();
    let (wa, wb) = (
        a.register_worker("a").await.unwrap(),
        b.register_worker("b").await.unwrap(),
    );
    let short = Duration::from_millis(300);
    let la = a.claim(&wa, 10, short, AGING).await.unwrap();
    assert_eq!(
        la,
        vec![Lease {
            stream: run.clone(),
            epoch: 1
        }]
    );
    assert!(
        b.claim(&wb, 10, short, AGING).await.unwrap().is_empty(),
        "a held lease is not granted twice"
    );
    a.append(&run, 1, vec![ev(b"by a")]).await.unwrap();

    // a stops renewing (as a paused process would); b claims once the lease lapses.
    let lb = claim_within(&b, &wb, Duration::from_secs(30)).await;
    assert_eq!(lb.epoch, 2);
    let refused = a
        .append(&run, 2, vec![ev(b"late, by a")])
        .await
        .unwrap_err();
    match &refused {
        StoreError::Fenced {
            held,
            current,
            holder,
            ..
        } => {
            assert_eq!((*held, *current), (1, 2));
            assert_eq!(holder, wb.as_str());
        }
        other => panic!("expected the append to be fenced, got {other}"),
    }
    // Before executing an effect, a confirms its claim: refused too; b's is renewed.
    assert!(matches!(
        a.confirm_claim(&run).await,
        Err(StoreError::Fenced {
            held: 1,
            current: 2,
            ..
        })
    ));
    assert_eq!(b.confirm_claim(&run).await.unwrap(), Some(2));
    // The stream is as b left it: a's late append left nothing.
    b.append(&run, 2, vec![ev(b"by b")]).await.unwrap();
    assert_eq!(b.head(&run).await.unwrap().unwrap().seq, 3);
    assert!(b.verify(&run).await.unwrap().is_sound());
    // a learns it lost the run at its next renewal.
    let lost = a.renew(&wa, &la, short).await.unwrap();
    assert_eq!(lost, la);
    // And stays fenced: at the version b reached, a's append is still refused as lapsed.
    let head = b.head(&run).await.unwrap().unwrap().seq;
    assert!(matches!(
        a.append(&run, head, vec![ev(b"later still")]).await,
        Err(StoreError::Fenced { .. })
    ));
    // b's renewal keeps its lease.
    assert!(b.renew(&wb, &[lb], short).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_run_waits_until_it_is_queued_again_and_a_stopped_worker_gives_its_runs_back() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let run = StreamId::new("run-2").unwrap();
    a.enqueue(&run, RunPriority::Normal).await.unwrap();
    let wa = a.register_worker("a").await.unwrap();
    let wb = b.register_worker("b").await.unwrap();
    let long = Duration::from_secs(60);
    let lease = a.claim(&wa, 1, long, AGING).await.unwrap().pop().unwrap();
    a.release(&wa, &lease, false, None).await.unwrap();
    assert!(
        b.claim(&wb, 1, long, AGING).await.unwrap().is_empty(),
        "a run waiting for a person is not claimed"
    );
    b.enqueue(&run, RunPriority::Normal).await.unwrap();
    let lease = b.claim(&wb, 1, long, AGING).await.unwrap().pop().unwrap();
    assert_eq!(lease.epoch, 2);
    // b stops: its run is claimable at once, long before its lease would lapse.
    b.stop_worker(&wb).await.unwrap();
    let again = a.claim(&wa, 1, long, AGING).await.unwrap();
    assert_eq!(
        again,
        vec![Lease {
            stream: run.clone(),
            epoch: 3
        }]
    );
    let workers = a.workers().await.unwrap();
    assert!(
        workers
            .iter()
            .any(|w| w.holder == wb.as_str() && w.stopped && w.holds == 0)
    );
    assert!(
        workers
            .iter()
            .any(|w| w.holder == wa.as_str() && !w.stopped && w.holds == 1)
    );
    let leases = a.leases().await.unwrap();
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].holder.as_deref(), Some(wa.as_str()));
    assert!(leases[0].expires_in_ms.is_some_and(|ms| ms > 0));
}

/// A drive asked for while a worker holds the run (a person decided its ticket through
/// another process) is not lost when that worker gives the run back as waiting; a run held
/// is not claimed again until its lease lapses, queued or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drive_asked_for_while_a_run_is_held_survives_its_release() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let run = StreamId::new("run-3").unwrap();
    a.enqueue(&run, RunPriority::Normal).await.unwrap();
    let wa = a.register_worker("a").await.unwrap();
    let wb = b.register_worker("b").await.unwrap();
    let long = Duration::from_secs(60);
    let lease = a.claim(&wa, 1, long, AGING).await.unwrap().pop().unwrap();
    assert_eq!(lease.epoch, 1);
    b.enqueue(&run, RunPriority::Normal).await.unwrap();
    assert!(
        b.claim(&wb, 1, long, AGING).await.unwrap().is_empty(),
        "a run held under a live lease is not claimed, queued or not"
    );
    // a's drive ended waiting for a person, as it saw the run.
    a.release(&wa, &lease, false, None).await.unwrap();
    let leases = a.leases().await.unwrap();
    assert_eq!(
        (leases[0].runnable, leases[0].holder.as_deref()),
        (true, None),
        "{leases:?}"
    );
    assert_eq!(
        b.claim(&wb, 1, long, AGING).await.unwrap(),
        vec![Lease {
            stream: run.clone(),
            epoch: 2
        }]
    );
    // Claimed, it waits for nothing more: given back as waiting, it stays put.
    let lease = Lease {
        stream: run.clone(),
        epoch: 2,
    };
    b.release(&wb, &lease, false, None).await.unwrap();
    assert!(a.claim(&wa, 1, long, AGING).await.unwrap().is_empty());
}

/// docs/postgres.md, "Workers": a run given back waiting on a timer is not queued, and is
/// claimed by any worker once the timer is due by the database's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_given_back_on_a_timer_is_claimed_once_it_is_due() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let long = Duration::from_secs(60);
    let (wa, wb) = (
        a.register_worker("a").await.unwrap(),
        b.register_worker("b").await.unwrap(),
    );
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let (later, due) = (
        StreamId::new("run-later").unwrap(),
        StreamId::new("run-due").unwrap(),
    );
    for run in [&later, &due] {
        a.enqueue(run, RunPriority::Normal).await.unwrap();
    }
    let mut held = a.claim(&wa, 2, long, AGING).await.unwrap();
    held.sort_by(|x, y| x.stream.as_str().cmp(y.stream.as_str()));
    let [due_lease, later_lease] = [held[0].clone(), held[1].clone()];
    assert_eq!(due_lease.stream, due);
    a.release(&wa, &later_lease, false, Some(now_ms + 3_600_000))
        .await
        .unwrap();
    a.release(&wa, &due_lease, false, Some(now_ms - 1_000))
        .await
        .unwrap();
    assert_eq!(
        b.claim(&wb, 10, long, AGING).await.unwrap(),
        vec![Lease {
            stream: due.clone(),
            epoch: 2
        }],
        "the run due is claimed, the one due in an hour is not"
    );
    // Claimed, its due time is cleared: given back waiting for nothing, it stays put.
    let again = Lease {
        stream: due,
        epoch: 2,
    };
    b.release(&wb, &again, false, None).await.unwrap();
    assert!(a.claim(&wa, 10, long, AGING).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_handed_out_once_among_racing_workers() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    for i in 0..40 {
        a.enqueue(
            &StreamId::new(format!("run-{i}")).unwrap(),
            RunPriority::Normal,
        )
        .await
        .unwrap();
    }
    let wa = a.register_worker("a").await.unwrap();
    let wb = b.register_worker("b").await.unwrap();
    let long = Duration::from_secs(60);
    let (ca, cb) = tokio::join!(
        async {
            let mut all = Vec::new();
            for _ in 0..10 {
                all.extend(a.claim(&wa, 3, long, AGING).await.unwrap());
            }
            all
        },
        async {
            let mut all = Vec::new();
            for _ in 0..10 {
                all.extend(b.claim(&wb, 3, long, AGING).await.unwrap());
            }
            all
        }
    );
    let mut streams: Vec<&str> = ca.iter().chain(&cb).map(|l| l.stream.as_str()).collect();
    assert_eq!(streams.len(), 40, "every queued run is claimed");
    streams.sort_unstable();
    streams.dedup();
    assert_eq!(streams.len(), 40, "no run is claimed twice");
}

/// Stores `a` and `b` over one new database, and a plain connection to it (to set when a
/// run became ready, as if it had waited).
async fn two_stores_and_sql() -> Option<(PostgresStore, PostgresStore, tokio_postgres::Client)> {
    let cluster = TestCluster::shared()?;
    let db = cluster.database();
    let a = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .unwrap();
    let b = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .unwrap();
    let (sql, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    Some((a, b, sql))
}

/// Claims one run at a time, as a worker with room for one, until none is left: the runs
/// in the order they were claimed.
async fn claim_one_by_one(store: &PostgresStore, holder: &Holder) -> Vec<String> {
    let long = Duration::from_secs(60);
    let mut order = Vec::new();
    while let Some(lease) = store.claim(holder, 1, long, AGING).await.unwrap().pop() {
        order.push(lease.stream.as_str().to_owned());
        store.release(holder, &lease, false, None).await.unwrap();
    }
    order
}

/// docs/postgres.md#claim-order: runs queued while the worker is at capacity are claimed
/// HIGH before NORMAL before LOW, those of one priority in the order they became ready
/// (whatever order they were queued in across priorities); a run queued again while it
/// waits keeps its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_claimed_by_priority_then_in_the_order_they_became_ready() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let long = Duration::from_secs(60);
    let wa = a.register_worker("a").await.unwrap();
    let wb = b.register_worker("b").await.unwrap();
    // The worker's one slot is taken.
    let busy = StreamId::new("busy").unwrap();
    a.enqueue(&busy, RunPriority::Low).await.unwrap();
    let held = a.claim(&wa, 1, long, AGING).await.unwrap().pop().unwrap();
    assert_eq!(held.stream, busy);
    for (run, priority) in [
        ("low-1", RunPriority::Low),
        ("normal-1", RunPriority::Normal),
        ("high-1", RunPriority::High),
        ("low-2", RunPriority::Low),
        ("normal-2", RunPriority::Normal),
        ("high-2", RunPriority::High),
    ] {
        b.enqueue(&StreamId::new(run).unwrap(), priority)
            .await
            .unwrap();
    }
    // Queued again while it waits (a second resume): it keeps the place it had.
    b.enqueue(&StreamId::new("high-1").unwrap(), RunPriority::High)
        .await
        .unwrap();
    let leases = b.leases().await.unwrap();
    let priority_of = |run: &str| {
        leases
            .iter()
            .find(|l| l.stream.as_str() == run)
            .map(|l| l.priority)
    };
    assert_eq!(
        [
            priority_of("busy"),
            priority_of("low-1"),
            priority_of("high-2")
        ],
        [
            Some(RunPriority::Low),
            Some(RunPriority::Low),
            Some(RunPriority::High)
        ]
    );
    // The slot is free again: the worker takes the queue one run at a time.
    a.release(&wa, &held, false, None).await.unwrap();
    assert_eq!(
        claim_one_by_one(&a, &wa).await,
        ["high-1", "high-2", "normal-1", "normal-2", "low-1", "low-2"]
    );
    // With room for several, one claim takes the first of the same order.
    for (run, priority) in [
        ("l", RunPriority::Low),
        ("n", RunPriority::Normal),
        ("h", RunPriority::High),
    ] {
        b.enqueue(&StreamId::new(run).unwrap(), priority)
            .await
            .unwrap();
    }
    let mut two: Vec<String> = a
        .claim(&wa, 2, long, AGING)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.stream.as_str().to_owned())
        .collect();
    two.sort_unstable();
    assert_eq!(two, ["h", "n"]);
    assert_eq!(claim_one_by_one(&b, &wb).await, ["l"]);
}

/// docs/postgres.md#claim-order: a run that has waited long is not starved by newer runs
/// of a higher priority: with the default aging (60 s a step), a LOW run that became ready
/// 3 minutes ago goes before a HIGH one queued now, and one that became ready 90 s ago
/// goes after it but before a NORMAL one queued now. The same holds for a run given back
/// on a timer, from the time it fell due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_run_that_waited_long_is_claimed_before_newer_high_ones() {
    let Some((a, _b, sql)) = two_stores_and_sql().await else {
        return;
    };
    let wa = a.register_worker("a").await.unwrap();
    for (run, priority) in [
        ("low-old", RunPriority::Low),
        ("low-older", RunPriority::Low),
        ("high-new", RunPriority::High),
        ("low-recent", RunPriority::Low),
        ("normal-new", RunPriority::Normal),
        ("low-due", RunPriority::Low),
    ] {
        a.enqueue(&StreamId::new(run).unwrap(), priority)
            .await
            .unwrap();
    }
    // As if they had waited: queued 3 minutes, 4 minutes and 90 s ago; one given back on a
    // timer that fell due 150 s ago.
    sql.batch_execute(
        "UPDATE docket_leases SET queued_at = now() - interval '3 minutes'
             WHERE stream = 'low-old';
         UPDATE docket_leases SET queued_at = now() - interval '4 minutes'
             WHERE stream = 'low-older';
         UPDATE docket_leases SET queued_at = now() - interval '90 seconds'
             WHERE stream = 'low-recent';
         UPDATE docket_leases SET runnable = false, due_at = now() - interval '150 seconds'
             WHERE stream = 'low-due';",
    )
    .await
    .unwrap();
    assert_eq!(
        claim_one_by_one(&a, &wa).await,
        [
            "low-older",
            "low-old",
            "low-due",
            "high-new",
            "low-recent",
            "normal-new"
        ]
    );
}
