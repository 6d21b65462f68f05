//! What `docket serve` keeps in the database: a token, a session and the request log
//! written through one process's store are seen whole through another's (two API servers
//! over one database).

use std::time::Duration;

use docket_store_postgres::{
    ApiRequestRow, ApiTokenRow, PostgresConfig, PostgresStore, TestCluster,
};

/// As many sessions as a test keeps at once.
const MAX: usize = 10_000;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_sessions_and_requests_are_shared_by_every_process() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let token = ApiTokenRow {
        name: "alice".into(),
        role: "approver".into(),
        sha256: "ab".repeat(32),
        created_s: 1_700_000_000,
    };
    assert!(a.api_token_create(&token).await.unwrap());
    // A second token of the same name is refused, the first kept.
    let again = ApiTokenRow {
        sha256: "cd".repeat(32),
        ..token.clone()
    };
    assert!(!b.api_token_create(&again).await.unwrap());
    assert_eq!(b.api_tokens().await.unwrap(), vec![token.clone()]);
    assert_eq!(
        b.api_token_by_hash(&token.sha256).await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(b.api_token_by_hash(&again.sha256).await.unwrap(), None);

    // A session opened through one is live through the other, and ends with its token.
    let session = "ef".repeat(32);
    assert!(
        a.api_session_open(&session, &token.sha256, Duration::from_secs(60), MAX)
            .await
            .unwrap()
    );
    assert!(
        !a.api_session_open("00", &again.sha256, Duration::from_secs(60), MAX)
            .await
            .unwrap(),
        "a session needs a token that exists"
    );
    assert_eq!(
        b.api_session_token(&session).await.unwrap(),
        Some(token.clone())
    );

    let first = ApiRequestRow {
        at_ms: 1,
        by: "alice".into(),
        role: "approver".into(),
        method: "POST".into(),
        path: "/api/runs".into(),
        status: 201,
    };
    let second = ApiRequestRow {
        at_ms: 2,
        path: "/api/runs/run-1/tickets/t-1/approve".into(),
        status: 200,
        ..first.clone()
    };
    a.api_request_record(&first).await.unwrap();
    b.api_request_record(&second).await.unwrap();
    assert_eq!(a.api_requests().await.unwrap(), vec![first, second]);

    assert_eq!(
        b.api_token_revoke("alice").await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(a.api_token_by_hash(&token.sha256).await.unwrap(), None);
    assert_eq!(a.api_session_token(&session).await.unwrap(), None);
    assert_eq!(b.api_token_revoke("alice").await.unwrap(), None);

    // A lapsed session is not live: one whose expiry is the moment it was opened has
    // lapsed by the database's clock at the next statement.
    assert!(a.api_token_create(&token).await.unwrap());
    let lapsed = "12".repeat(32);
    assert!(
        a.api_session_open(&lapsed, &token.sha256, Duration::ZERO, MAX)
            .await
            .unwrap()
    );
    assert_eq!(b.api_session_token(&lapsed).await.unwrap(), None);
    assert_eq!(a.api_session_count().await.unwrap(), 1);

    // At most `max` are kept: the next open drops the lapsed one, then those that lapse
    // soonest.
    let ids: Vec<String> = ["31", "32", "33"].iter().map(|b| b.repeat(32)).collect();
    for (ttl, id) in [60, 120, 180].into_iter().zip(&ids) {
        assert!(
            b.api_session_open(id, &token.sha256, Duration::from_secs(ttl), 2)
                .await
                .unwrap()
        );
    }
    assert_eq!(a.api_session_count().await.unwrap(), 2);
    assert_eq!(a.api_session_token(&ids[0]).await.unwrap(), None);
    for id in &ids[1..] {
        assert_eq!(a.api_session_token(id).await.unwrap(), Some(token.clone()));
    }
    a.api_session_close(&ids[2]).await.unwrap();
    assert_eq!(b.api_session_token(&ids[2]).await.unwrap(), None);
    assert_eq!(a.api_session_count().await.unwrap(), 1);
}
