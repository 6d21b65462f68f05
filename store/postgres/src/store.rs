//! [`PostgresStore`]: the [`EventStore`] over a PostgreSQL database.

use std::collections::{HashMap, VecDeque};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use docket_store::merkle::TreeHash;
use docket_store::proofs::MemoryTree;
use docket_store::{
    Appended, ChainBreak, ConsistencyProof, Disclosures, Event, EventStore, Hash, InclusionProof,
    MAX_PAYLOAD, NewEvent, Payload, Snapshot, StoreError, StoredDisclosure, StreamDigest,
    StreamHead, StreamId, TreeHead, VerifyReport, blob_hash, check_event_record, genesis,
    kept_snapshots, seal_events,
};
use futures::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;

use crate::PostgresConfig;
use crate::append::{AppendJob, commit_loop, hash_of};
use crate::error::PgError;
use crate::leases::Holder;
use crate::listen::{Watchers, listen, sweep};
use crate::read::Cursor;
use crate::schema::{self, SCHEMA_VERSION, SchemaState, db};
use crate::tls::Tls;

/// docket's event log in a PostgreSQL database. Cheap to clone.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// The database as messages name it: user, host, port and name, never the password.
    database: Arc<str>,
    heads: Arc<Heads>,
    watchers: Arc<Watchers>,
    appends: mpsc::UnboundedSender<AppendJob>,
    poll: Duration,
    listener: tokio::task::JoinHandle<()>,
    sweeper: tokio::task::JoinHandle<()>,
    /// The claims this process holds, by stream: its appends to them carry these.
    fences: Mutex<HashMap<StreamId, (Holder, u64, Duration)>>,
    /// Opened only to read ([`PostgresConfig::read_only`]).
    read_only: bool,
    /// Whether this open created docket's tables (the store is new).
    created: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The committer ends by itself once the queued appends are committed.
        self.listener.abort();
        self.sweeper.abort();
    }
}

/// Streams' heads this process appended or read: an append after one of them seals its
/// events without asking the database (a stream's event at a given sequence never changes,
/// and the transaction checks the head again under its lock).
#[derive(Default)]
pub(crate) struct Heads(Mutex<HashMap<StreamId, (u64, Hash)>>);

impl Heads {
    pub(crate) fn remember(&self, stream: &StreamId, seq: u64, hash: Hash) {
        let mut heads = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = heads.entry(stream.clone()).or_insert((seq, hash));
        if seq >= entry.0 {
            *entry = (seq, hash);
        }
    }

    pub(crate) fn forget(&self, stream: &StreamId) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(stream);
    }

    fn get(&self, stream: &StreamId) -> Option<(u64, Hash)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(stream)
            .copied()
    }
}

impl PostgresStore {
    /// Opens the store in the database `config.url` names, creating docket's tables in a
    /// database that has none unless it is opened only to read (then
    /// [`PgError::NoSchema`]). A database whose schema is older than this docket's is
    /// refused until `docket store migrate` upgrades it; a newer one always.
    pub async fn open(config: PostgresConfig) -> Result<PostgresStore, StoreError> {
        let mut target = crate::tls::parse(&config.url)?;
        let database = target.database.clone();
        let mut client = target
            .connect()
            .await
            .map_err(db(&database, "connecting"))?;
        let mut created = false;
        match schema::state(&client, &database).await? {
            SchemaState::Empty if config.read_only => {
                return Err(PgError::NoSchema { database }.into());
            }
            SchemaState::Empty => {
                // Another process may have created them since the state was read.
                created = !schema::migrate(&mut client, &database).await?.is_empty();
            }
            SchemaState::At(found) if found > SCHEMA_VERSION => {
                return Err(PgError::SchemaNewer {
                    database,
                    found,
                    known: SCHEMA_VERSION,
                }
                .into());
            }
            SchemaState::At(found) if found < SCHEMA_VERSION => {
                return Err(PgError::SchemaOlder {
                    database,
                    found,
                    needed: SCHEMA_VERSION,
                }
                .into());
            }
            SchemaState::At(_) => {}
        }
        drop(client);
        if config.read_only {
            // The server refuses every write of these connections, whatever the code asks.
            crate::tls::add_option(&mut target.config, "-c default_transaction_read_only=on");
        }
        let recycling = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match &target.tls {
            Tls::Off => Manager::from_config(target.config.clone(), NoTls, recycling),
            Tls::On(tls) => Manager::from_config(target.config.clone(), tls.clone(), recycling),
        };
        let pool = Pool::builder(manager)
            .max_size(config.connections.max(2))
            .build()
            .map_err(|e| PgError::NoConnection {
                database: database.clone(),
                doing: "opening the store".to_owned(),
                why: e.to_string(),
            })?;
        let database: Arc<str> = database.into();
        let heads = Arc::new(Heads::default());
        let watchers = Arc::new(Watchers::default());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(commit_loop(
            pool.clone(),
            database.clone(),
            heads.clone(),
            watchers.clone(),
            rx,
        ));
        let listener = tokio::spawn(listen(target, Arc::downgrade(&watchers)));
        let sweeper = tokio::spawn(sweep(
            pool.clone(),
            database.clone(),
            Arc::downgrade(&watchers),
            config.poll_interval,
        ));
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                pool,
                database,
                heads,
                watchers,
                appends: tx,
                poll: config.poll_interval,
                listener,
                sweeper,
                fences: Mutex::default(),
                read_only: config.read_only,
                created,
            }),
        })
    }

    /// Brings the database's schema to this docket's version (creating it in an empty
    /// database): the schema found before, and the versions applied.
    pub async fn migrate(url: &str) -> Result<(SchemaState, Vec<i32>), StoreError> {
        let target = crate::tls::parse(url)?;
        let database = target.database.clone();
        let mut client = target
            .connect()
            .await
            .map_err(db(&database, "connecting"))?;
        let before = schema::state(&client, &database).await?;
        let applied = schema::migrate(&mut client, &database).await?;
        Ok((before, applied))
    }

    /// Sets (or, with `None`, clears) the claim this process's appends to `stream` carry.
    pub(crate) fn fence(&self, stream: &StreamId, claim: Option<(Holder, u64, Duration)>) {
        let mut fences = self
            .inner
            .fences
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match claim {
            Some(claim) => {
                fences.insert(stream.clone(), claim);
            }
            None => {
                fences.remove(stream);
            }
        }
    }

    /// Clears every claim `holder` held in this process.
    pub(crate) fn unfence_all(&self, holder: &Holder) {
        self.inner
            .fences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, (h, _, _)| h != holder);
    }

    fn fence_of(&self, stream: &StreamId) -> Option<(Holder, u64, Duration)> {
        self.inner
            .fences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(stream)
            .cloned()
    }

    /// Wakes when a run may have become runnable (or at the latest after the poll interval).
    pub async fn runnable_changed(&self, rx: &mut tokio::sync::watch::Receiver<u64>) {
        let _ = tokio::time::timeout(self.inner.poll, rx.changed()).await;
    }

    /// Wake-ups for workers: a counter raised when a run is queued or released.
    #[must_use]
    pub fn runnable_wakeups(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watchers.runnable()
    }

    /// Whether opening it created docket's tables: a new store.
    #[must_use]
    pub fn created_schema(&self) -> bool {
        self.inner.created
    }

    /// The database, as messages name it (without a password).
    #[must_use]
    pub fn database(&self) -> &str {
        &self.inner.database
    }

    pub(crate) async fn client(&self, doing: &str) -> Result<Object, PgError> {
        self.inner
            .pool
            .get()
            .await
            .map_err(|e| PgError::NoConnection {
                database: self.inner.database.to_string(),
                doing: doing.to_owned(),
                why: e.to_string(),
            })
    }

    pub(crate) fn db<'a>(
        &'a self,
        doing: &'a str,
    ) -> impl FnOnce(tokio_postgres::Error) -> PgError + 'a {
        db(&self.inner.database, doing)
    }

    fn bad_row(&self, what: String) -> PgError {
        PgError::BadRow {
            database: self.inner.database.to_string(),
            what,
        }
    }

    /// The stream's head in the database (sequence 0 and the genesis hash when it has none).
    async fn head_row(&self, client: &Object, stream: &StreamId) -> Result<(u64, Hash), PgError> {
        let doing = format!("reading the head of stream {stream}");
        let query = client
            .prepare_cached("SELECT seq, head FROM docket_streams WHERE id = $1")
            .await
            .map_err(self.db(&doing))?;
        let row = client
            .query_opt(&query, &[&stream.as_str()])
            .await
            .map_err(self.db(&doing))?;
        match row {
            None => Ok((0, genesis(stream))),
            Some(row) => {
                let seq = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
                let head = hash_of(row.get(1)).ok_or_else(|| {
                    self.bad_row(format!("the head of stream {stream} is not a 32-byte hash"))
                })?;
                Ok((seq, head))
            }
        }
    }

    /// The hash of event `seq` of `stream`, if it has one.
    async fn event_hash_at(
        &self,
        client: &Object,
        stream: &StreamId,
        seq: u64,
    ) -> Result<Option<Hash>, PgError> {
        let doing = format!("reading event {seq} of stream {stream}");
        let query = client
            .prepare_cached(
                "SELECT substring(record FROM length(record) - 31) FROM docket_events WHERE stream = $1 AND seq = $2",
            )
            .await
            .map_err(self.db(&doing))?;
        let row = client
            .query_opt(&query, &[&stream.as_str(), &to_i64(seq)])
            .await
            .map_err(self.db(&doing))?;
        row.map(|r| {
            hash_of(r.get(0)).ok_or_else(|| {
                self.bad_row(format!(
                    "event {seq} of stream {stream} is shorter than its hashes"
                ))
            })
        })
        .transpose()
    }

    /// The hash the events of an append at `expected` follow: from what this process knows,
    /// or from the database; a conflict when the stream is shorter than `expected`.
    async fn prev_of(&self, stream: &StreamId, expected: u64) -> Result<Hash, StoreError> {
        if expected == 0 {
            return Ok(genesis(stream));
        }
        if let Some((seq, hash)) = self.inner.heads.get(stream)
            && seq == expected
        {
            return Ok(hash);
        }
        let client = self.client("appending").await?;
        match self.event_hash_at(&client, stream, expected).await? {
            Some(hash) => Ok(hash),
            None => {
                let (actual, _) = self.head_row(&client, stream).await?;
                Err(StoreError::Conflict {
                    stream: stream.clone(),
                    expected,
                    actual,
                })
            }
        }
    }

    /// Every event's leaf and chain hash, up to `size`, from the database.
    async fn tree(&self, stream: &StreamId, size: u64) -> Result<MemoryTree, StoreError> {
        let doing = format!("reading the Merkle leaves of stream {stream}");
        let client = self.client(&doing).await?;
        let query = client
            .prepare_cached(
                "SELECT leaf, substring(record FROM length(record) - 31) FROM docket_events WHERE stream = $1 AND seq <= $2 ORDER BY seq",
            )
            .await
            .map_err(self.db(&doing))?;
        let rows = client
            .query(&query, &[&stream.as_str(), &to_i64(size)])
            .await
            .map_err(self.db(&doing))?;
        let mut tree = MemoryTree {
            leaves: Vec::with_capacity(rows.len()),
            hashes: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            let (Some(leaf), Some(hash)) = (hash_of(row.get(0)), hash_of(row.get(1))) else {
                return Err(self
                    .bad_row(format!("a leaf of stream {stream} is not 32 bytes"))
                    .into());
            };
            tree.leaves.push(TreeHash(leaf.0));
            tree.hashes.push(hash);
        }
        Ok(tree)
    }

    async fn held(&self, stream: &StreamId) -> Result<u64, StoreError> {
        let client = self.client("reading a stream's head").await?;
        Ok(self.head_row(&client, stream).await?.0)
    }

    fn cursor(&self, stream: &StreamId, next: u64, to: Option<u64>) -> Cursor {
        Cursor {
            pool: self.inner.pool.clone(),
            database: self.inner.database.clone(),
            stream: stream.clone(),
            next: next.max(1),
            to,
            prev: None,
            buf: VecDeque::new(),
            wake: None,
            clamp: to.is_some(),
            done: false,
        }
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl EventStore for PostgresStore {
    async fn append(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, StoreError> {
        self.append_with_blobs(stream, expected_version, events, Vec::new())
            .await
    }

    async fn append_with_blobs(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
        blobs: Vec<Vec<u8>>,
    ) -> Result<Appended, StoreError> {
        if events.is_empty() {
            return Err(StoreError::EmptyAppend {
                stream: stream.clone(),
            });
        }
        let total = events
            .iter()
            .map(|e| {
                e.payload
                    .len()
                    .saturating_add(e.kind.len())
                    .saturating_add(160)
            })
            .chain(blobs.iter().map(|b| b.len().saturating_add(37)))
            .fold(0, usize::saturating_add);
        if total > MAX_PAYLOAD {
            return Err(StoreError::TooLarge {
                stream: stream.clone(),
                len: total,
                max: MAX_PAYLOAD,
            });
        }
        let prev = self.prev_of(stream, expected_version).await?;
        let events = seal_events(stream, expected_version, prev, events)?;
        let blobs = blobs.into_iter().map(|b| (blob_hash(&b), b)).collect();
        let (reply, rx) = oneshot::channel();
        self.inner
            .appends
            .send(AppendJob {
                stream: stream.clone(),
                expected: expected_version,
                fence: self
                    .fence_of(stream)
                    .map(|(holder, epoch, _)| (holder, epoch)),
                prev,
                events,
                blobs,
                reply,
            })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    fn read(
        &self,
        stream: &StreamId,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        self.cursor(stream, *range.start(), Some(*range.end()))
            .into_stream()
    }

    fn tail(
        &self,
        stream: &StreamId,
        from: u64,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        let mut cursor = self.cursor(stream, from, None);
        cursor.wake = Some(self.inner.watchers.subscribe(stream));
        cursor.into_stream()
    }

    async fn head(&self, stream: &StreamId) -> Result<Option<StreamHead>, StoreError> {
        let client = self.client("reading a stream's head").await?;
        let (seq, hash) = self.head_row(&client, stream).await?;
        Ok((seq > 0).then(|| StreamHead {
            stream: stream.clone(),
            seq,
            hash,
        }))
    }

    async fn streams(&self) -> Result<Vec<StreamHead>, StoreError> {
        let doing = "listing streams";
        let client = self.client(doing).await?;
        let rows = client
            .query("SELECT id, seq, head FROM docket_streams", &[])
            .await
            .map_err(self.db(doing))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.get(0);
            let stream = StreamId::new(id)?;
            let hash = hash_of(row.get(2)).ok_or_else(|| {
                self.bad_row(format!("the head of stream {stream} is not a 32-byte hash"))
            })?;
            out.push(StreamHead {
                seq: to_u64(row.get(1)),
                hash,
                stream,
            });
        }
        // Stream id order is byte order, whatever the database's collation.
        out.sort_by(|a, b| a.stream.cmp(&b.stream));
        Ok(out)
    }

    async fn put_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        state: Vec<u8>,
    ) -> Result<(), StoreError> {
        if self.inner.read_only {
            return Ok(()); // a cache: a reader leaves it for the next writer
        }
        let doing = format!("keeping a snapshot of stream {stream}");
        let mut client = self.client(&doing).await?;
        let hash = match seq {
            0 => None,
            _ => self.event_hash_at(&client, stream, seq).await?,
        };
        let Some(hash) = hash else {
            let (head, _) = self.head_row(&client, stream).await?;
            return Err(StoreError::SnapshotBeyondHead {
                stream: stream.clone(),
                seq,
                head,
            });
        };
        let tx = client.transaction().await.map_err(self.db(&doing))?;
        tx.execute(
            "INSERT INTO docket_snapshots (stream, seq, event_hash, state) VALUES ($1, $2, $3, $4)
             ON CONFLICT (stream, seq) DO UPDATE SET event_hash = excluded.event_hash, state = excluded.state",
            &[&stream.as_str(), &to_i64(seq), &hash.0.as_slice(), &state],
        )
        .await
        .map_err(self.db(&doing))?;
        let seqs: Vec<u64> = tx
            .query(
                "SELECT seq FROM docket_snapshots WHERE stream = $1 ORDER BY seq",
                &[&stream.as_str()],
            )
            .await
            .map_err(self.db(&doing))?
            .iter()
            .map(|r| to_u64(r.get(0)))
            .collect();
        let keep = kept_snapshots(&seqs);
        let drop: Vec<i64> = seqs
            .into_iter()
            .filter(|s| !keep.contains(s))
            .map(to_i64)
            .collect();
        if !drop.is_empty() {
            tx.execute(
                "DELETE FROM docket_snapshots WHERE stream = $1 AND seq = ANY($2)",
                &[&stream.as_str(), &drop],
            )
            .await
            .map_err(self.db(&doing))?;
        }
        tx.commit().await.map_err(self.db(&doing))?;
        Ok(())
    }

    async fn latest_snapshot(
        &self,
        stream: &StreamId,
        at_or_before: u64,
    ) -> Result<Option<Snapshot>, StoreError> {
        let doing = format!("reading a snapshot of stream {stream}");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                "SELECT seq, event_hash, state FROM docket_snapshots WHERE stream = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1",
                &[&stream.as_str(), &to_i64(at_or_before)],
            )
            .await
            .map_err(self.db(&doing))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let event_hash = hash_of(row.get(1)).ok_or_else(|| {
            self.bad_row(format!(
                "a snapshot of stream {stream} names no 32-byte event hash"
            ))
        })?;
        Ok(Some(Snapshot {
            stream: stream.clone(),
            seq: to_u64(row.get(0)),
            event_hash,
            state: row.get(2),
        }))
    }

    async fn put_digests(&self, digests: Vec<StreamDigest>) -> Result<(), StoreError> {
        if digests.is_empty() || self.inner.read_only {
            return Ok(());
        }
        let doing = "keeping stream digests";
        let mut client = self.client(doing).await?;
        let tx = client.transaction().await.map_err(self.db(doing))?;
        for d in &digests {
            let held = tx
                .query_opt(
                    "SELECT seq FROM docket_streams WHERE id = $1",
                    &[&d.stream.as_str()],
                )
                .await
                .map_err(self.db(doing))?
                .map_or(0, |r| to_u64(r.get(0)));
            if d.seq == 0 || d.seq > held {
                return Err(StoreError::DigestBeyondHead {
                    stream: d.stream.clone(),
                    seq: d.seq,
                    head: held,
                });
            }
            tx.execute(
                "INSERT INTO docket_digests (stream, seq, event_hash, bytes) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, event_hash = excluded.event_hash, bytes = excluded.bytes",
                &[&d.stream.as_str(), &to_i64(d.seq), &d.event_hash.0.as_slice(), &d.bytes],
            )
            .await
            .map_err(self.db(doing))?;
        }
        tx.commit().await.map_err(self.db(doing))?;
        Ok(())
    }

    async fn digests(&self) -> Result<Vec<StreamDigest>, StoreError> {
        let doing = "reading stream digests";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT stream, seq, event_hash, bytes FROM docket_digests",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let stream = StreamId::new(row.get::<_, String>(0))?;
            let event_hash = hash_of(row.get(2)).ok_or_else(|| {
                self.bad_row(format!(
                    "the digest of stream {stream} names no 32-byte event hash"
                ))
            })?;
            out.push(StreamDigest {
                stream,
                seq: to_u64(row.get(1)),
                event_hash,
                bytes: row.get(3),
            });
        }
        out.sort_by(|a, b| a.stream.cmp(&b.stream));
        Ok(out)
    }

    async fn remove_snapshots(&self, stream: &StreamId) -> Result<u64, StoreError> {
        let doing = format!("removing the snapshots of stream {stream}");
        let client = self.client(&doing).await?;
        let removed = client
            .execute(
                "DELETE FROM docket_snapshots WHERE stream = $1",
                &[&stream.as_str()],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(removed)
    }

    async fn tree_head(
        &self,
        stream: &StreamId,
        size: Option<u64>,
    ) -> Result<TreeHead, StoreError> {
        let held = self.held(stream).await?;
        let tree = match size.unwrap_or(held) {
            want if want > 0 && want <= held => Some(self.tree(stream, want).await?),
            _ => None,
        };
        docket_store::proofs::tree_head(stream, held, size, || tree.ok_or(StoreError::Closed))
    }

    async fn inclusion_proof(
        &self,
        stream: &StreamId,
        seq: u64,
        tree_size: Option<u64>,
    ) -> Result<InclusionProof, StoreError> {
        let held = self.held(stream).await?;
        let tree = match tree_size.unwrap_or(held) {
            want if want > 0 && want <= held && seq > 0 && seq <= want => {
                Some(self.tree(stream, want).await?)
            }
            _ => None,
        };
        docket_store::proofs::inclusion(stream, held, seq, tree_size, || {
            tree.ok_or(StoreError::Closed)
        })
    }

    async fn consistency_proof(
        &self,
        stream: &StreamId,
        old_size: u64,
        new_size: Option<u64>,
    ) -> Result<ConsistencyProof, StoreError> {
        let held = self.held(stream).await?;
        let tree = match new_size.unwrap_or(held) {
            want if want > 0 && want <= held && old_size <= want => {
                Some(self.tree(stream, want).await?)
            }
            _ => None,
        };
        docket_store::proofs::consistency(stream, held, old_size, new_size, || {
            tree.ok_or(StoreError::Closed)
        })
    }

    async fn verify(&self, stream: &StreamId) -> Result<VerifyReport, StoreError> {
        let doing = format!("verifying stream {stream}");
        let held = self.held(stream).await?;
        let client = self.client(&doing).await?;
        let mut report = VerifyReport {
            stream: stream.clone(),
            verified: 0,
            first_break: None,
        };
        let mut prev = None;
        let mut next = 1u64;
        let query = client
            .prepare_cached(
                "SELECT seq, record, leaf FROM docket_events WHERE stream = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
            )
            .await
            .map_err(self.db(&doing))?;
        let blob = client
            .prepare_cached("SELECT bytes FROM docket_blobs WHERE hash = $1")
            .await
            .map_err(self.db(&doing))?;
        'chunks: while next <= held {
            let rows = client
                .query(
                    &query,
                    &[&stream.as_str(), &to_i64(next), &crate::read::CHUNK],
                )
                .await
                .map_err(self.db(&doing))?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let seq = to_u64(row.get(0));
                if seq > held {
                    break 'chunks;
                }
                if seq != next {
                    report.first_break = Some(ChainBreak::Missing {
                        expected: next,
                        found: seq,
                    });
                    return Ok(report);
                }
                let record: &[u8] = row.get(1);
                let event = match check_event_record(stream, seq, prev, record) {
                    Ok(event) => event,
                    Err(b) => {
                        report.first_break = Some(b);
                        return Ok(report);
                    }
                };
                let leaf = docket_store::merkle::leaf_hash(record);
                if hash_of(row.get(2)).map(|h| TreeHash(h.0)) != Some(leaf) {
                    report.first_break = Some(ChainBreak::Unreadable {
                        seq,
                        what: "its stored Merkle leaf is not the hash of its record".to_owned(),
                    });
                    return Ok(report);
                }
                if let Payload::Blob(r) = &event.payload {
                    let bytes: Option<Vec<u8>> = client
                        .query_opt(&blob, &[&r.hash.0.as_slice()])
                        .await
                        .map_err(self.db(&doing))?
                        .map(|row| row.get(0));
                    if bytes.is_none_or(|b| blob_hash(&b) != r.hash || b.len() as u64 != r.len) {
                        report.first_break = Some(ChainBreak::BadBlob { seq, hash: r.hash });
                        return Ok(report);
                    }
                }
                prev = Some(event.hash);
                next = seq + 1;
                report.verified = seq;
            }
        }
        if report.verified < held {
            report.first_break = Some(ChainBreak::HeadMismatch {
                indexed: held,
                found: report.verified,
            });
        }
        Ok(report)
    }

    async fn put_disclosures(
        &self,
        stream: &StreamId,
        disclosures: Vec<([u8; 32], Vec<u8>)>,
    ) -> Result<(), StoreError> {
        if disclosures.is_empty() {
            return Ok(());
        }
        let doing = format!("keeping disclosures of stream {stream}");
        let client = self.client(&doing).await?;
        let (digests, bytes): (Vec<&[u8]>, Vec<&[u8]>) = disclosures
            .iter()
            .map(|(d, b)| (d.as_slice(), b.as_slice()))
            .unzip();
        client
            .execute(
                "INSERT INTO docket_disclosures (stream, digest, bytes)
                 SELECT $1, d, b FROM unnest($2::bytea[], $3::bytea[]) AS t(d, b)
                 ON CONFLICT (stream, digest) DO NOTHING",
                &[&stream.as_str(), &digests, &bytes],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(())
    }

    async fn disclosures(&self, stream: &StreamId) -> Result<Disclosures, StoreError> {
        let doing = format!("reading disclosures of stream {stream}");
        let client = self.client(&doing).await?;
        let rows = client
            .query(
                "SELECT digest, bytes, tombstone FROM docket_disclosures WHERE stream = $1",
                &[&stream.as_str()],
            )
            .await
            .map_err(self.db(&doing))?;
        let mut out = Disclosures::new();
        for row in rows {
            let digest: [u8; 32] = hash_of(row.get(0))
                .ok_or_else(|| {
                    self.bad_row(format!(
                        "a disclosure of stream {stream} has no 32-byte digest"
                    ))
                })?
                .0;
            let stored = match (
                row.get::<_, Option<Vec<u8>>>(1),
                row.get::<_, Option<Vec<u8>>>(2),
            ) {
                (_, Some(note)) => StoredDisclosure::Shredded(note),
                (Some(bytes), None) => StoredDisclosure::Present(bytes),
                (None, None) => {
                    return Err(self
                        .bad_row(format!(
                            "a disclosure of stream {stream} holds neither bytes nor a tombstone"
                        ))
                        .into());
                }
            };
            out.insert(digest, stored);
        }
        Ok(out)
    }

    async fn shred_disclosures(
        &self,
        stream: &StreamId,
        digests: Vec<[u8; 32]>,
        note: Vec<u8>,
    ) -> Result<Disclosures, StoreError> {
        let doing = format!("erasing disclosures of stream {stream}");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(self.db(&doing))?;
        let digests: Vec<&[u8]> = digests.iter().map(<[u8; 32]>::as_slice).collect();
        tx.execute(
            "UPDATE docket_disclosures SET bytes = NULL, tombstone = $3
             WHERE stream = $1 AND digest = ANY($2) AND tombstone IS NULL",
            &[&stream.as_str(), &digests, &note],
        )
        .await
        .map_err(self.db(&doing))?;
        tx.execute(
            "DELETE FROM docket_snapshots WHERE stream = $1",
            &[&stream.as_str()],
        )
        .await
        .map_err(self.db(&doing))?;
        tx.commit().await.map_err(self.db(&doing))?;
        drop(client);
        self.disclosures(stream).await
    }

    fn shared(&self) -> bool {
        true
    }

    async fn confirm_claim(&self, stream: &StreamId) -> Result<Option<u64>, StoreError> {
        let Some((holder, epoch, lease)) = self.fence_of(stream) else {
            return Ok(None);
        };
        let doing = format!("confirming the claim of {holder} on run {stream}");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                "UPDATE docket_leases SET expires_at = now() + make_interval(secs => $4)
                 WHERE stream = $1 AND holder = $2 AND epoch = $3
                 RETURNING 1",
                &[
                    &stream.as_str(),
                    &holder.as_str(),
                    &to_i64(epoch),
                    &lease.as_secs_f64(),
                ],
            )
            .await
            .map_err(self.db(&doing))?;
        if row.is_some() {
            return Ok(Some(epoch));
        }
        // The fence stays: every later append of this process to the stream is refused.
        let now = client
            .query_opt(
                "SELECT epoch, holder FROM docket_leases WHERE stream = $1",
                &[&stream.as_str()],
            )
            .await
            .map_err(self.db(&doing))?;
        let (current, by) = now.map_or((0, None), |r| {
            (to_u64(r.get(0)), r.get::<_, Option<String>>(1))
        });
        Err(StoreError::Fenced {
            stream: stream.clone(),
            held: epoch,
            current,
            holder: by.unwrap_or_else(|| "no worker".to_owned()),
        })
    }

    async fn put_blob(&self, bytes: Vec<u8>) -> Result<Hash, StoreError> {
        if bytes.len() > MAX_PAYLOAD {
            return Err(StoreError::BlobTooLarge {
                len: bytes.len(),
                max: MAX_PAYLOAD,
            });
        }
        let hash = blob_hash(&bytes);
        let doing = "keeping a blob";
        let client = self.client(doing).await?;
        client
            .execute(
                "INSERT INTO docket_blobs (hash, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&hash.0.as_slice(), &bytes],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(hash)
    }

    async fn get_blob(&self, hash: &Hash) -> Result<Option<Vec<u8>>, StoreError> {
        let doing = format!("reading blob {hash}");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                "SELECT bytes FROM docket_blobs WHERE hash = $1",
                &[&hash.0.as_slice()],
            )
            .await
            .map_err(self.db(&doing))?;
        match row.map(|r| r.get::<_, Vec<u8>>(0)) {
            Some(bytes) if blob_hash(&bytes) == *hash => Ok(Some(bytes)),
            Some(_) => Err(self
                .bad_row(format!("blob {hash} does not hash to its name"))
                .into()),
            None => Ok(None),
        }
    }
}
