//! Log segments: the golden logs' segment files with bytes flipped, set, inserted,
//! deleted, repeated or cut (and, in some cases, every batch frame's CRC made right again
//! so the damage reaches the records inside), a stray file or an empty next segment
//! beside them, opened by everything that reads a data directory: the store's read-only
//! scan (`scan_log`), `docket verify` (`docket_evidence::verify`), the read-only view
//! (every stream read and verified) and the writer's recovery (`EmbeddedStore::open`,
//! then every stream verified and one event appended to a new stream).
//!
//! An input is `FIXTURE SEGMENT EXTRA` on its first line (`v12/geo 1 none`), the
//! segment's bytes after.

use std::path::{Path, PathBuf};

use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};
use futures::StreamExt as _;
use proptest::prelude::*;

use super::{split_header, with_header};
use crate::mutate::{self, ByteOp, Dictionary};
use crate::{Bound, Target};

/// A golden log: a data directory holding one run.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Its path under `tests/golden` (`v12/geo`).
    pub label: String,
    pub dir: PathBuf,
    pub run_id: String,
}

/// Every golden log under `tests/golden`, in path order.
#[must_use]
pub fn golden_fixtures() -> Vec<Fixture> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<Fixture>) {
        let manifest = dir.join("golden.toml");
        if manifest.is_file() {
            let run_id = std::fs::read_to_string(&manifest)
                .ok()
                .and_then(|t| t.parse::<toml::Table>().ok())
                .and_then(|t| t.get("run_id").and_then(|v| v.as_str()).map(str::to_owned));
            if let Some(run_id) = run_id {
                out.push(Fixture {
                    label: dir
                        .strip_prefix(root)
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    dir: dir.to_owned(),
                    run_id,
                });
            }
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for d in dirs {
            walk(root, &d, out);
        }
    }
    let root = crate::repository().join("tests/golden");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

/// Copies the files of `from` into `to`, recursively.
///
/// # Errors
/// What could not be copied.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from)
        .map_err(|e| format!("{}: {e}", from.display()))?
        .flatten()
    {
        let p = entry.path();
        let target = to.join(entry.file_name());
        if p.is_dir() {
            copy_dir(&p, &target)?;
        } else {
            std::fs::copy(&p, &target).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    Ok(())
}

/// Something beside the damaged segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    None,
    /// A file in `log/` that is not a segment.
    StrayFile,
    /// The next segment, empty.
    EmptyNext,
    /// The next segment holding only the damaged one's header.
    HeaderOnlyNext,
    /// The marker's last byte changed.
    Marker,
}

impl Extra {
    const ALL: [(Extra, &'static str); 5] = [
        (Extra::None, "none"),
        (Extra::StrayFile, "stray-file"),
        (Extra::EmptyNext, "empty-next"),
        (Extra::HeaderOnlyNext, "header-only-next"),
        (Extra::Marker, "marker"),
    ];

    fn word(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(e, _)| *e == self)
            .map_or("none", |(_, w)| w)
    }

    fn of(word: &str) -> Self {
        Self::ALL
            .iter()
            .find(|(_, w)| *w == word)
            .map_or(Extra::None, |(e, _)| *e)
    }
}

/// A damaged copy of one segment of a golden log.
#[derive(Debug, Clone)]
pub struct SegmentCase {
    pub fixture: usize,
    pub segment: usize,
    pub ops: Vec<ByteOp>,
    /// Whether every batch frame's CRC is made right after the damage.
    pub reframe: bool,
    pub extra: Extra,
}

struct Seed {
    fixture: Fixture,
    /// The segment files (name, bytes), in order.
    segments: Vec<(String, Vec<u8>)>,
}

pub struct Segments {
    seeds: Vec<Seed>,
    dict: Dictionary,
    scratch: tempfile::TempDir,
    cases: u64,
    runtime: tokio::runtime::Runtime,
    /// Inputs the scan read to a clean end, that `verify` passed, that the writer opened,
    /// and that the writer appended to.
    scanned_clean: u64,
    verified: u64,
    opened: u64,
    appended: u64,
}

impl Segments {
    /// The golden logs' segments as seeds.
    ///
    /// # Errors
    /// A golden log that cannot be read.
    pub fn new() -> Result<Self, crate::SetupError> {
        let mut seeds = Vec::new();
        for fixture in golden_fixtures() {
            let log = fixture.dir.join("log");
            let mut names: Vec<String> = std::fs::read_dir(&log)
                .map_err(|e| format!("{}: {e}", log.display()))?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            let mut segments = Vec::new();
            for n in names {
                let bytes = std::fs::read(log.join(&n)).map_err(|e| format!("{n}: {e}"))?;
                segments.push((n, bytes));
            }
            if !segments.is_empty() {
                seeds.push(Seed { fixture, segments });
            }
        }
        if seeds.is_empty() {
            return Err("no golden logs under tests/golden".into());
        }
        // Bytes the format gives meaning to: magics, tags, and the marker's text.
        let mut dict = Dictionary::default();
        dict.extend([
            "DKTB",
            "DOCKETLG",
            "\u{1}",
            "\u{2}",
            "\u{3}",
            "\u{4}",
            "\u{0}\u{0}\u{0}\u{0}",
            "\u{ff}\u{ff}\u{ff}\u{7f}",
            "docket-store format 3\n",
        ]);
        // Fast scratch space where there is one.
        let shm = Path::new("/dev/shm");
        let scratch = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            seeds,
            dict,
            scratch,
            cases: 0,
            runtime,
            scanned_clean: 0,
            verified: 0,
            opened: 0,
            appended: 0,
        })
    }
}

/// Makes every batch frame's CRC right again, walking frames from the header on while
/// their magic and length hold.
pub fn reframe(bytes: &mut [u8]) {
    let mut at = 32;
    while at + 12 <= bytes.len() && &bytes[at..at + 4] == b"DKTB" {
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]])
            as usize;
        let end = at + 12 + len;
        if end > bytes.len() {
            break;
        }
        let crc = crc32fast::hash(&bytes[at + 12..end]);
        bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// The stream [`exercise`] appends to.
const APPENDED: &str = "fuzz-appended";

/// Reads and verifies every stream of `store`; appends one event to a new stream when
/// `append`, and says whether it was acknowledged.
async fn exercise(store: &EmbeddedStore, append: bool) -> bool {
    let Ok(streams) = store.streams().await else {
        return false;
    };
    for head in streams {
        let mut events = store.read(&head.stream, 1..=u64::MAX);
        while let Some(e) = events.next().await {
            if e.is_err() {
                break;
            }
        }
        let _ = store.verify(&head.stream).await;
    }
    if append && let Ok(stream) = StreamId::new(APPENDED) {
        let event = NewEvent {
            kind: "fuzz.appended".into(),
            kind_version: 1,
            recorded_at: WallTime(1),
            policy: None,
            payload: b"{}".to_vec(),
        };
        return store.append(&stream, 0, vec![event]).await.is_ok();
    }
    false
}

/// Whether a read-only view of `dir` reads the event [`exercise`] appended.
async fn appended_is_read(dir: &Path) -> bool {
    let Ok(store) = EmbeddedStore::open_read_only(dir).await else {
        return false;
    };
    let Ok(stream) = StreamId::new(APPENDED) else {
        return false;
    };
    let events: Vec<_> = store.read(&stream, 1..=1).collect().await;
    events.len() == 1 && events.iter().all(Result::is_ok)
}

impl Target for Segments {
    type Case = SegmentCase;

    fn name(&self) -> &'static str {
        "segments"
    }

    fn strategy(&self) -> BoxedStrategy<SegmentCase> {
        let extra = prop_oneof![
            6 => Just(Extra::None),
            1 => Just(Extra::StrayFile),
            1 => Just(Extra::EmptyNext),
            1 => Just(Extra::HeaderOnlyNext),
            1 => Just(Extra::Marker),
        ];
        (
            0..self.seeds.len(),
            any::<usize>(),
            mutate::byte_ops(4),
            any::<bool>(),
            extra,
        )
            .prop_map(|(fixture, segment, ops, reframe, extra)| SegmentCase {
                fixture,
                segment,
                ops,
                reframe,
                extra,
            })
            .boxed()
    }

    fn render(&self, case: &SegmentCase) -> Vec<u8> {
        let seed = &self.seeds[case.fixture % self.seeds.len()];
        let segment = case.segment % seed.segments.len();
        let mut bytes = seed.segments[segment].1.clone();
        mutate::apply_bytes(&mut bytes, &case.ops, &self.dict);
        if case.reframe {
            reframe(&mut bytes);
        }
        with_header(
            &format!(
                "{} {} {}",
                seed.fixture.label,
                segment + 1,
                case.extra.word()
            ),
            &bytes,
        )
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        self.seeds
            .iter()
            .flat_map(|s| {
                s.segments.iter().enumerate().map(|(i, (_, b))| {
                    with_header(&format!("{} {} none", s.fixture.label, i + 1), b)
                })
            })
            .collect()
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let (header, body) = split_header(input);
        let mut words = header.split(' ');
        let label = words.next().unwrap_or("");
        let segment: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
        let extra = Extra::of(words.next().unwrap_or("none"));
        let Some(seed) = self
            .seeds
            .iter()
            .find(|s| s.fixture.label == label)
            .or(self.seeds.first())
        else {
            return Ok(());
        };
        self.cases += 1;
        let dir = self.scratch.path().join(format!("case-{}", self.cases));
        let log = dir.join("log");
        std::fs::create_dir_all(&log).map_err(|e| e.to_string())?;
        let marker = seed.fixture.dir.join("DOCKET-STORE");
        let mut marker_bytes = std::fs::read(&marker).map_err(|e| e.to_string())?;
        if extra == Extra::Marker
            && let Some(last) = marker_bytes.last_mut()
        {
            *last ^= 0x01;
        }
        std::fs::write(dir.join("DOCKET-STORE"), &marker_bytes).map_err(|e| e.to_string())?;
        for (i, (name, bytes)) in seed.segments.iter().enumerate() {
            let content = if i + 1 == segment {
                body
            } else {
                bytes.as_slice()
            };
            std::fs::write(log.join(name), content).map_err(|e| e.to_string())?;
        }
        let next = format!("{:020}.seg", seed.segments.len() + 1);
        match extra {
            Extra::StrayFile => std::fs::write(log.join("notes.txt"), b"x"),
            Extra::EmptyNext => std::fs::write(log.join(&next), b""),
            Extra::HeaderOnlyNext => std::fs::write(log.join(&next), &body[..body.len().min(32)]),
            Extra::None | Extra::Marker => Ok(()),
        }
        .map_err(|e| e.to_string())?;

        if let Ok(summary) = docket_store::scan_log(&dir, |_| {})
            && matches!(summary.end, docket_store::LogEnd::Clean)
        {
            self.scanned_clean += 1;
        }
        match docket_evidence::verify(&dir, &docket_evidence::VerifyOptions::default()) {
            Ok(v) => {
                if v.is_sound() {
                    self.verified += 1;
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
        let read_dir = dir.clone();
        let (opened, appended, read) = self.runtime.block_on(async move {
            match EmbeddedStore::open_read_only(&read_dir).await {
                Ok(store) => {
                    exercise(&store, false).await;
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
            let config = StoreConfig {
                durability: docket_store::Durability::UnsafeNoSync,
                lock_wait: std::time::Duration::from_secs(5),
                ..StoreConfig::default()
            };
            match EmbeddedStore::open(&read_dir, config).await {
                Ok(store) => {
                    let appended = exercise(&store, true).await;
                    store.close().await;
                    let read = appended && appended_is_read(&read_dir).await;
                    (true, appended, read)
                }
                Err(e) => {
                    let _ = e.to_string();
                    (false, false, false)
                }
            }
        });
        self.opened += u64::from(opened);
        self.appended += u64::from(appended);
        if appended && !read {
            let _ = std::fs::remove_dir_all(&dir);
            return Err("the writer acknowledged an append that a reader of the directory then does not read".into());
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    fn bound(&self) -> Bound {
        // The writer's index (sled) and threads are the constant; the log's records are
        // read one batch at a time.
        Bound {
            per_byte: 512,
            constant: 64 << 20,
        }
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "{} inputs scanned to a clean end, {} passed verify, {} opened by the writer, {} appended to by it",
            self.scanned_clean, self.verified, self.opened, self.appended
        )]
    }
}
