//! TLS to the database: a server whose certificate a private CA signed is reached with
//! `sslmode=require&sslrootcert=CA`; without the CA, or with another, the handshake is
//! refused in words; a password to a remote host without TLS is refused before anything
//! is sent.

use docket_store::{EventStore, NewEvent, StreamId, WallTime};
use docket_store_postgres::{PostgresConfig, PostgresStore, TestCluster};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A CA's certificate (PEM), and a server certificate and key it signed for `localhost`.
fn pki(name: &str) -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signed_by_the_given_ca_is_reached_over_tls_and_others_are_refused() {
    let (ca, cert, key) = pki("docket test CA");
    let Some(cluster) = TestCluster::with_tls(&cert, &key) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let db = cluster.database();
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        db.url,
        ca_file.display()
    );
    let store = PostgresStore::open(PostgresConfig::new(&url))
        .await
        .unwrap();
    let run = StreamId::new("run-tls").unwrap();
    let event = NewEvent {
        kind: "k".into(),
        kind_version: 1,
        recorded_at: WallTime(1),
        policy: None,
        payload: b"over tls".to_vec(),
    };
    store.append(&run, 0, vec![event]).await.unwrap();
    assert_eq!(store.head(&run).await.unwrap().unwrap().seq, 1);

    // Another CA did not sign the server's certificate.
    let (other, _, _) = pki("another CA");
    let other_file = dir.path().join("other.pem");
    std::fs::write(&other_file, &other).unwrap();
    let url = format!(
        "{}?sslmode=require&sslrootcert={}",
        db.url,
        other_file.display()
    );
    let refused = PostgresStore::open(PostgresConfig::new(&url))
        .await
        .err()
        .expect("refused");
    let said = refused.to_string();
    assert!(said.contains("certificate is not trusted"), "{said}");
    assert!(
        said.contains(&db.name),
        "the error names the database: {said}"
    );

    // A CA file that is not one.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let url = format!("{}?sslmode=require&sslrootcert={}", db.url, junk.display());
    let said = PostgresStore::open(PostgresConfig::new(&url))
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        said.contains("junk.pem") && said.contains("no certificate"),
        "{said}"
    );
}

#[tokio::test]
async fn a_password_across_a_network_without_tls_is_refused_before_connecting() {
    // Nothing listens there: the refusal comes before any connection is tried.
    let url = "postgres://app:hunter2@db.example.invalid:5432/docket";
    let said = PostgresStore::open(PostgresConfig::new(url))
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(said.contains("sslmode=require"), "{said}");
    assert!(
        !said.contains("hunter2"),
        "the password is never shown: {said}"
    );
    assert!(
        said.contains("postgres://app@db.example.invalid:5432/docket"),
        "{said}"
    );
}
