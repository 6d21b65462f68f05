//! Keys, seals and `docket verify` through the binary (docs/checkpoints.md): a finished
//! run is sealed and verifies; an insider who rewrites a finished run's last event with
//! every hash and checksum recomputed is caught by its signed checkpoint, and one who also
//! rewrites the log of run heads without the key is caught too; an auditor's earlier
//! checkpoint checks against a grown log and fails against a rewritten one; verify changes
//! no byte of the data directory and runs while another process writes the store.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use docket_store::merkle::{TreeBuilder, event_leaf_hash};
use docket_store::{LogPosition, Payload, Scanned, event_hash, scan_log};
use docket_tests::{docket_bin, docket_on, exit_code, stdout_text, summary_run_id};

const WRITER: &str = env!("CARGO_BIN_EXE_test-agent");

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        std::fs::write(
            root.join("bundle.toml"),
            r#"
bundle = { id = "seal" }
[[agents]]
id = "external"
[[agents]]
id = "writer"
[interactions]
allowed = [{ from = "external", to = "writer" }, { from = "writer", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
        )
        .expect("bundle");
        std::fs::write(root.join("input.json"), r#"{"topic": "launch"}"#).expect("input");
        std::fs::write(
            root.join("workflow.toml"),
            format!(
                "name = \"seal\"\npolicy = \"bundle.toml\"\nentry = \"writer\"\ninput = \"input.json\"\n\
                 [evidence]\nredactable = true\n\
                 [agents.writer]\ncommand = {WRITER:?}\nargs = [\"finish\"]\n"
            ),
        )
        .expect("workflow");
        Setup {
            data: root.join("data"),
            root,
            _tmp: tmp,
        }
    }

    fn docket(&self, args: &[&str]) -> std::process::Output {
        docket_on(&self.data, args)
    }

    fn keys(&self) -> String {
        let out = self.docket(&["keys", "generate", "--name", "example.com/docket"]);
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout_text(&out)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs the workflow to completion; returns the run id.
    fn run(&self) -> String {
        let workflow = self.root.join("workflow.toml");
        let out = self.docket(&["run", workflow.to_str().expect("utf-8")]);
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        summary_run_id(&out)
    }

    /// [`Setup::run`] with signing turned off (`DOCKET_SIGNING_KEY=none`): the run is left
    /// unsigned, and a new data directory gets no key.
    fn run_unsigned(&self) -> String {
        let workflow = self.root.join("workflow.toml");
        let out = Command::new(docket_bin())
            .args(["run", workflow.to_str().expect("utf-8"), "--data"])
            .arg(&self.data)
            .env("DOCKET_SIGNING_KEY", "none")
            .output()
            .expect("docket runs");
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        summary_run_id(&out)
    }

    fn verify(&self, args: &[&str]) -> (i32, String) {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        let out = self.docket(&all);
        let text = format!(
            "{}{}",
            stdout_text(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        (exit_code(&out), text)
    }
}

#[test]
fn keys_are_generated_once_kept_private_and_shown_in_verifier_form() {
    let s = Setup::new();
    let shown_before = s.docket(&["keys", "show"]);
    assert_eq!(exit_code(&shown_before), 1);
    assert!(String::from_utf8_lossy(&shown_before.stderr).contains("docket keys generate"));
    let key = s.keys();
    // name+keyid+base64(0x01 ‖ 32-byte key): 33 bytes are 44 base64 characters.
    let parts: Vec<&str> = key.splitn(3, '+').collect();
    assert_eq!(parts[0], "example.com/docket");
    assert_eq!(parts[1].len(), 8, "{key}");
    assert_eq!(parts[2].len(), 44, "{key}");
    assert!(parts[2].starts_with('A'), "0x01 first: {key}");
    let shown = s.docket(&["keys", "show"]);
    assert_eq!(stdout_text(&shown).trim(), key);
    let signer = s.data.join("keys/signer.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&signer).expect("key file").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let private = std::fs::read_to_string(&signer).expect("key");
    assert!(private.starts_with("PRIVATE+KEY+example.com/docket+"));
    // Never overwritten without --force.
    let again = s.docket(&["keys", "generate"]);
    assert_eq!(exit_code(&again), 1);
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&signer).expect("key"), private);
    let bad = s.docket(&["keys", "generate", "--force", "--name", "has space"]);
    assert_eq!(exit_code(&bad), 1);
    // A run records into the directory the key was made in (the store was created first).
    let run = s.run();
    assert!(!run.is_empty());
}

#[test]
fn a_finished_run_is_sealed_and_verifies_and_without_a_key_is_unsigned() {
    let s = Setup::new();
    let unsigned_run = s.run_unsigned();
    let (code, text) = s.verify(&[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("ok    {unsigned_run}")), "{text}");
    assert!(text.contains("unsigned"), "{text}");
    let (code, text) = s.verify(&["--require-signed"]);
    assert_eq!(code, 1, "{text}");

    s.keys();
    let run = s.run();
    // The run finished before the key existed is sealed by this command too (catch-up).
    let (code, text) = s.verify(&[]);
    assert_eq!(code, 0, "{text}");
    for r in [&unsigned_run, &run] {
        assert!(
            text.contains(&format!("ok    {r}")) && text.contains("sealed by example.com/docket+"),
            "{text}"
        );
    }
    assert!(
        text.contains("run heads  2 seals, checkpoint at 2"),
        "{text}"
    );
    // The log of run heads is not a run.
    let runs = stdout_text(&s.docket(&["runs"]));
    assert_eq!(runs.lines().count(), 2, "{runs}");
    assert!(!runs.contains("_heads"), "{runs}");
    let replayed = s.docket(&["replay", "--all"]);
    assert_eq!(exit_code(&replayed), 0, "{}", stdout_text(&replayed));
    let (code, text) = s.verify(&["--require-signed", &run]);
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains(&unsigned_run),
        "only the run asked for: {text}"
    );
    let (code, text) = s.verify(&["no-such-run"]);
    assert_eq!(code, 1);
    assert!(text.contains("no run no-such-run"), "{text}");
    // A pinned key that is not the directory's: every seal fails.
    let other = Setup::new();
    let other_key = other.keys();
    let (code, text) = s.verify(&["--key", &other_key]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("not made with a trusted key"), "{text}");
    // A missing data directory is an error, and is not created.
    let missing = s.root.join("nowhere");
    let out = docket_on(&missing, &["verify"]);
    assert_eq!(exit_code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no data directory"));
    assert!(!missing.exists());
}

/// Where an event is in the log, and its stream and sequence.
fn locate(data: &Path, stream: &str) -> Vec<(u64, LogPosition)> {
    let mut found = Vec::new();
    scan_log(data, |r| {
        if let Scanned::Event { event, at, .. } = r
            && event.stream.as_str() == stream
        {
            found.push((event.seq, at));
        }
    })
    .expect("scan");
    found
}

/// Rewrites, in its segment file, event `seq` of `stream` as an insider with write access
/// to the files (but no key) would: `edit` changes its canonical body and its `prev`; its
/// hash is recomputed, the record written back plain (a compressed one expanded, store
/// format 2), its frame's length and CRC fixed, and the index (a cache) deleted so that it
/// is rebuilt from the rewritten log. Returns the new hash.
fn rewrite_event(
    data: &Path,
    stream: &str,
    seq: u64,
    edit: impl FnOnce(&mut Vec<u8>, &mut [u8; 32]),
) -> docket_store::Hash {
    let at = locate(data, stream)
        .into_iter()
        .find(|(s, _)| *s == seq)
        .map(|(_, at)| at)
        .expect("the event to rewrite");
    let path = data.join("log").join(format!("{:020}.seg", at.segment));
    let mut bytes = std::fs::read(&path).expect("segment");
    let record = at.record as usize;
    let n = u32::from_le_bytes(bytes[record..record + 4].try_into().expect("4")) as usize;
    let end = record + 4 + n;
    let (is_event, opened) = docket_store::open_record(&bytes[record..end]).expect("a record");
    assert!(is_event, "the record is an event");
    let mut canonical = opened[..opened.len() - 64].to_vec();
    let mut prev = [0u8; 32];
    prev.copy_from_slice(&opened[opened.len() - 64..opened.len() - 32]);
    edit(&mut canonical, &mut prev);
    let hash = event_hash(&docket_store::Hash(prev), &canonical);
    let mut plain = u32::try_from(1 + canonical.len() + 64)
        .expect("len")
        .to_le_bytes()
        .to_vec();
    plain.push(1);
    plain.extend_from_slice(&canonical);
    plain.extend_from_slice(&prev);
    plain.extend_from_slice(&hash.0);
    bytes.splice(record..end, plain.iter().copied());
    let frame = at.frame as usize;
    let old_len = u32::from_le_bytes(bytes[frame + 4..frame + 8].try_into().expect("4")) as usize;
    let len = old_len + plain.len() - (end - record);
    bytes[frame + 4..frame + 8].copy_from_slice(&u32::try_from(len).expect("len").to_le_bytes());
    let crc = crc32fast::hash(&bytes[frame + 12..frame + 12 + len]);
    bytes[frame + 8..frame + 12].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write segment");
    let _ = std::fs::remove_dir_all(data.join("index"));
    hash
}

/// [`rewrite_event`] replacing `from` with `to` in the event's canonical body.
fn forge(data: &Path, stream: &str, seq: u64, from: &[u8], to: &[u8]) -> docket_store::Hash {
    rewrite_event(data, stream, seq, |body, _| {
        let pos = body
            .windows(from.len())
            .position(|w| w == from)
            .expect("the text to rewrite is in the event");
        body.splice(pos..pos + from.len(), to.iter().copied());
    })
}

/// The RFC 9162 root of a stream's events as the log holds them now.
fn root_now(data: &Path, stream: &str) -> String {
    let mut tree = TreeBuilder::new();
    scan_log(data, |r| {
        if let Scanned::Event { event, .. } = r
            && event.stream.as_str() == stream
        {
            tree.push(event_leaf_hash(&event));
        }
    })
    .expect("scan");
    tree.root().to_hex()
}

/// The digests an encoding-3 payload commits to (`_sd` lists and `...`).
fn digests_in(value: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("_sd", serde_json::Value::Array(items)) => {
                        out.extend(items.iter().filter_map(|d| d.as_str().map(str::to_owned)));
                    }
                    ("...", serde_json::Value::String(d)) => out.push(d.clone()),
                    _ => out.extend(digests_in(v)),
                }
            }
        }
        serde_json::Value::Array(items) => out.extend(items.iter().flat_map(digests_in)),
        _ => {}
    }
    out
}

/// The payload of a stream's event, as the log holds it.
fn payload_of(data: &Path, stream: &str, seq: u64) -> Vec<u8> {
    let mut found = Vec::new();
    scan_log(data, |r| {
        if let Scanned::Event { event, .. } = r
            && event.stream.as_str() == stream
            && event.seq == seq
            && let Payload::Inline(bytes) = &event.payload
        {
            found.clone_from(bytes);
        }
    })
    .expect("scan");
    found
}

#[test]
fn an_insider_rewrite_with_recomputed_hashes_fails_verify_even_with_the_heads_log_rewritten() {
    let s = Setup::new();
    s.keys();
    let run = s.run();
    let second = s.run();
    let kept = s.root.join("kept-heads.note");
    std::fs::copy(s.data.join("checkpoints/heads.note"), &kept).expect("keep checkpoint");
    let (code, text) = s.verify(&["--checkpoint", kept.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{text}");

    // Rewrite the run's last event (run.completed) with every hash recomputed.
    let positions = locate(&s.data, &run);
    let (last_seq, _) = *positions.last().expect("events");
    let old_root = root_now(&s.data, &run);
    let old_last = payload_of(&s.data, &run, last_seq);
    // The output is committed apart (payload encoding 3): the insider swaps one of its
    // digests for the digest of another value of the run, whose disclosure is there, so
    // the chain and every disclosure still check.
    let own = digests_in(&serde_json::from_slice(&old_last).expect("json"));
    let other = positions
        .iter()
        .flat_map(|(seq, _)| {
            digests_in(
                &serde_json::from_slice(&payload_of(&s.data, &run, *seq)).unwrap_or_default(),
            )
        })
        .find(|d| !own.contains(d))
        .expect("another committed value");
    let new_hash = forge(&s.data, &run, last_seq, own[0].as_bytes(), other.as_bytes());
    // The chain still checks: the forgery is invisible without the tree.
    let (code, text) = s.verify(&[&run]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("FAIL  {run}  event {last_seq}"))
            && text.contains("no longer matches its signed checkpoint"),
        "{text}"
    );
    assert!(!text.contains("hash chain no longer links"), "{text}");
    // The other run is untouched.
    let (code, text) = s.verify(&[&second]);
    assert_eq!(code, 0, "{text}");

    // Now also rewrite its seal in the log of run heads: new root, new last hash, every
    // hash recomputed, but no key to sign them with.
    let new_root = root_now(&s.data, &run);
    let heads = locate(&s.data, "_heads");
    let seal_seq = heads
        .iter()
        .map(|(seq, _)| *seq)
        .find(|seq| {
            String::from_utf8_lossy(&payload_of(&s.data, "_heads", *seq)).contains(run.as_str())
        })
        .expect("the run's seal");
    let payload: serde_json::Value =
        serde_json::from_slice(&payload_of(&s.data, "_heads", seal_seq)).expect("json");
    let old_hash = payload["last_hash"].as_str().expect("last_hash").to_owned();
    assert_eq!(payload["root"], old_root.as_str());
    forge(
        &s.data,
        "_heads",
        seal_seq,
        old_root.as_bytes(),
        new_root.as_bytes(),
    );
    forge(
        &s.data,
        "_heads",
        seal_seq,
        old_hash.as_bytes(),
        new_hash.to_hex().as_bytes(),
    );
    // Later heads events link to the rewritten one: rewrite their prev and hash too.
    relink(&s.data, "_heads", seal_seq);
    let (code, text) = s.verify(&[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("FAIL  {run}")), "{text}");
    assert!(text.contains("FAIL  run heads"), "{text}");
    assert!(!text.contains("hash chain no longer links"), "{text}");
    // And against the checkpoint the auditor kept before the rewrite.
    let (code, text) = s.verify(&["--checkpoint", kept.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAIL  checkpoint") && text.contains("not an extension"),
        "{text}"
    );
}

/// Re-chains the events of `stream` after `seq`: each `prev` set to the hash before it and
/// each hash recomputed ([`rewrite_event`]).
fn relink(data: &Path, stream: &str, seq: u64) {
    let events = locate(data, stream);
    let mut prev = {
        let mut found = None;
        scan_log(data, |r| {
            if let Scanned::Event { event, .. } = r
                && event.stream.as_str() == stream
                && event.seq == seq
            {
                found = Some(event.hash);
            }
        })
        .expect("scan");
        found.expect("the rewritten event")
    };
    for (later, _) in events.into_iter().filter(|(s, _)| *s > seq) {
        prev = rewrite_event(data, stream, later, |_, p| *p = prev.0);
    }
}

#[test]
fn an_auditors_checkpoint_checks_against_a_grown_log_and_a_run_checkpoint_too() {
    let s = Setup::new();
    s.keys();
    let first = s.run();
    let kept_heads = s.root.join("heads-then.note");
    std::fs::copy(s.data.join("checkpoints/heads.note"), &kept_heads).expect("keep");
    let out = s.docket(&["verify", &first, "--json"]);
    assert_eq!(exit_code(&out), 0);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let run_note = report["runs"][0]["seals"][0]["checkpoint"]
        .as_str()
        .expect("the run's signed checkpoint")
        .to_owned();
    assert!(run_note.starts_with(&format!("example.com/docket/run/{first}\n")));
    let kept_run = s.root.join("run.note");
    std::fs::write(&kept_run, &run_note).expect("keep run checkpoint");
    for _ in 0..3 {
        s.run();
    }
    let (code, text) = s.verify(&["--checkpoint", kept_heads.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("example.com/docket/heads at size 1")
            && text.contains("the log now holds 4 and extends it"),
        "{text}"
    );
    let (code, text) = s.verify(&["--checkpoint", kept_run.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{text}");
    // A checkpoint whose signature was tampered with.
    let tampered = s.root.join("tampered.note");
    let forged = std::fs::read_to_string(&kept_heads)
        .expect("note")
        .replacen("\n1\n", "\n2\n", 1);
    std::fs::write(&tampered, forged).expect("write");
    let (code, text) = s.verify(&["--checkpoint", tampered.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("signature"), "{text}");
}

#[test]
fn a_checkpoint_signed_for_another_trusted_keys_origin_is_refused() {
    let s = Setup::new();
    s.keys();
    let run = s.run();
    let out = s.docket(&["verify", &run, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let note = report["runs"][0]["seals"][0]["checkpoint"]
        .as_str()
        .expect("the run's signed checkpoint");
    // Another instance's key, trusted too, names the origin; this instance's key signs.
    let elsewhere = s.root.join("elsewhere");
    let made = docket_on(
        &elsewhere,
        &["keys", "generate", "--name", "other.example/docket"],
    );
    assert_eq!(exit_code(&made), 0);
    let other = stdout_text(&docket_on(&elsewhere, &["keys", "show"]))
        .trim()
        .to_owned();
    let own = stdout_text(&s.docket(&["keys", "show"])).trim().to_owned();
    let mut checkpoint = docket_evidence::SignedCheckpoint::parse(note)
        .expect("a checkpoint")
        .checkpoint;
    checkpoint.origin = format!("other.example/docket/run/{run}");
    let signer = docket_evidence::signer(&s.data)
        .expect("keys")
        .expect("a key");
    let forged = s.root.join("forged.note");
    std::fs::write(&forged, checkpoint.sign(&signer).expect("signed")).expect("write");
    let (code, text) = s.verify(&[
        "--key",
        &own,
        "--key",
        &other,
        "--checkpoint",
        forged.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "its origin other.example/docket/run/{run} is neither example.com/docket/heads nor example.com/docket/run/<run id>"
        )),
        "{text}"
    );
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path.clone());
                out.insert(path, Vec::new());
            } else {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

#[test]
fn verify_changes_nothing_and_runs_while_another_process_writes() {
    let s = Setup::new();
    s.keys();
    s.run();
    let before = snapshot(&s.data);
    for args in [&[][..], &["--json"][..], &["--require-signed"][..]] {
        let (code, text) = s.verify(args);
        assert_eq!(code, 0, "{text}");
    }
    assert_eq!(
        snapshot(&s.data),
        before,
        "verify changed the data directory"
    );

    // Another process holds the store open and appends (with blobs, across segments).
    let writer_bin = env!("CARGO_BIN_EXE_store-crash-writer");
    let mut writer = Command::new(writer_bin)
        .arg(&s.data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start writer");
    let mut lines = std::io::BufReader::new(writer.stdout.take().expect("stdout")).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("ready"));
    // Keep reading its acknowledgements so it never blocks on a full pipe; go on once it
    // has acknowledged a good many events.
    let (acks, acked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (i, _) in lines.map_while(Result::ok).enumerate() {
            if i == 2000 {
                let _ = acks.send(());
            }
        }
    });
    acked.recv().expect("the writer acknowledged 2000 events");
    let mut results = Vec::new();
    for _ in 0..5 {
        results.push(s.verify(&[]));
    }
    let _ = writer.kill();
    let _ = writer.wait();
    for (code, text) in results {
        assert_eq!(
            code, 0,
            "verify failed while a writer was appending:\n{text}"
        );
        assert!(text.contains("sealed by example.com/docket+"), "{text}");
    }
}

/// Someone holding the data directory and its key rebuilds the log from scratch (the same
/// run id, other content) and signs every seal and checkpoint anew: `docket verify` alone
/// finds it sound, `docket verify --against` a checkpoint published before does not.
#[test]
fn a_log_rebuilt_and_re_signed_fails_against_a_published_checkpoint() {
    let s = Setup::new();
    s.keys();
    let workflow = s.root.join("workflow.toml");
    let workflow = workflow.to_str().expect("utf-8");
    let out = s.docket(&["run", workflow, "--run-id", "launch-1"]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let published = s.root.join("published");
    let published_arg = published.to_str().expect("utf-8");
    let first = s.docket(&["checkpoint", "publish", "--to", published_arg]);
    assert_eq!(
        stdout_text(&first),
        format!(
            "the heads checkpoint at size 1 (example.com/docket/heads) kept in {}\n",
            published.join("heads-1.note").display()
        ),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let again = s.docket(&["checkpoint", "publish", "--to", published_arg]);
    assert!(
        stdout_text(&again).starts_with("the heads checkpoint at size 1 is already kept"),
        "{}",
        stdout_text(&again)
    );
    // The log grows: it still extends what was published.
    let out = s.docket(&["run", workflow, "--run-id", "launch-2"]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, text) = s.verify(&["--require-signed", "--against", published_arg]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(
            "ok    published example.com/docket/heads at size 1 signed by example.com/docket+"
        ) && text.contains("the log now holds 2 and extends it"),
        "{text}"
    );
    let second = s.docket(&["checkpoint", "publish", "--to", published_arg]);
    assert_eq!(
        exit_code(&second),
        0,
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    // The insider's rebuild: the same key, a new log with other content, every seal and
    // checkpoint signed anew.
    let rebuilt = s.root.join("rebuilt");
    std::fs::write(s.root.join("other.json"), r#"{"topic": "recall"}"#).expect("input");
    let other = s.root.join("other.json");
    for run in ["launch-1", "launch-2"] {
        // The key taken along: the new store signs with it.
        let out = Command::new(docket_bin())
            .args(["run", workflow, "--run-id", run, "--input"])
            .arg(&other)
            .arg("--data")
            .arg(&rebuilt)
            .env("DOCKET_SIGNING_KEY", s.data.join("keys/signer.key"))
            .output()
            .expect("docket runs");
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let alone = docket_on(&rebuilt, &["verify", "--require-signed"]);
    assert_eq!(
        exit_code(&alone),
        0,
        "sound on its own: {}",
        stdout_text(&alone)
    );
    let against = docket_on(
        &rebuilt,
        &["verify", "--require-signed", "--against", published_arg],
    );
    let text = stdout_text(&against);
    assert_eq!(exit_code(&against), 1, "{text}");
    assert!(
        text.contains("FAIL  published example.com/docket/heads at size 1  ")
            && text.contains("FAIL  published example.com/docket/heads at size 2  ")
            && text.contains("what you saw was rewritten"),
        "{text}"
    );
    // Publishing the rebuilt log's checkpoint over the one kept at its size is refused.
    let over = docket_on(&rebuilt, &["checkpoint", "publish", "--to", published_arg]);
    assert_eq!(exit_code(&over), 1);
    assert!(
        String::from_utf8_lossy(&over.stderr)
            .contains("the heads log was rewritten since it was kept"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
}
