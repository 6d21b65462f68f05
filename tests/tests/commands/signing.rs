//! Signed from the first run (docs/checkpoints.md#keys): a new data directory makes its
//! key and seals its first run; `DOCKET_SIGNING_KEY` keeps the private key in a file
//! outside the data directory, gives the key itself, or turns signing off; a checkpoint
//! handed to a witness command is the one the log holds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use docket_tests::{docket_bin, exit_code, one_agent_workflow, stdout_text};

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
    workflow: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        let agent = PathBuf::from(env!("CARGO_BIN_EXE_test-agent"));
        let workflow = one_agent_workflow(
            &root,
            "signing",
            "signing",
            agent.to_str().expect("utf-8"),
            &["finish"],
        );
        Setup {
            data: root.join("data"),
            root,
            workflow,
            _tmp: tmp,
        }
    }

    /// `docket ARGS --data DATA` with `DOCKET_SIGNING_KEY` set to `key` (unset: `None`).
    fn docket(&self, key: Option<&str>, args: &[&str]) -> Output {
        let mut command = Command::new(docket_bin());
        command.args(args).arg("--data").arg(&self.data);
        command.env_remove("DOCKET_SIGNING_KEY");
        if let Some(key) = key {
            command.env("DOCKET_SIGNING_KEY", key);
        }
        command.output().expect("docket runs")
    }

    /// Runs the workflow to completion: its stderr.
    fn run(&self, key: Option<&str>) -> String {
        let out = self.docket(key, &["run", self.workflow.to_str().expect("utf-8")]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(exit_code(&out), 0, "{stderr}");
        stderr
    }

    /// `docket verify --require-signed`: its exit code and everything it printed.
    fn verify_signed(&self) -> (i32, String) {
        let out = self.docket(None, &["verify", "--require-signed"]);
        let text = format!(
            "{}{}",
            stdout_text(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        (exit_code(&out), text)
    }
}

fn mode(path: &Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).expect("file").permissions())
        & 0o777
}

#[test]
fn a_new_data_directory_makes_its_key_and_seals_its_first_run() {
    let s = Setup::new();
    let stderr = s.run(None);
    let made = stderr
        .lines()
        .find(|l| l.starts_with("signing key made for the data directory"))
        .unwrap_or_else(|| panic!("no word of the key: {stderr}"));
    let shown = stdout_text(&s.docket(None, &["keys", "show"]));
    assert!(made.contains(shown.trim()), "{made} / {shown}");
    assert_eq!(mode(&s.data.join("keys/signer.key")), 0o600);
    let (code, text) = s.verify_signed();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("sealed by"), "{text}");
    // Said once: the second run's store is not new.
    let again = s.run(None);
    assert!(!again.contains("signing key made"), "{again}");
    let (code, text) = s.verify_signed();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("run heads  2 seals"), "{text}");
}

#[test]
fn a_key_kept_outside_the_data_directory_signs_and_never_enters_it() {
    let s = Setup::new();
    let key_file = s.root.join("secrets/signer.key");
    let place = key_file.to_str().expect("utf-8");
    let stderr = s.run(Some(place));
    assert!(stderr.contains(place), "the key's file is named: {stderr}");
    assert_eq!(mode(&key_file), 0o600);
    let private = std::fs::read_to_string(&key_file).expect("the key was made there");
    assert!(private.starts_with("PRIVATE+KEY+"), "{private}");
    // Only the public half is in the data directory.
    assert!(!s.data.join("keys/signer.key").exists());
    let secret = key_data(private.trim()).to_owned();
    for (path, bytes) in docket_tests::files_under(&s.data) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&secret),
            "{} holds the private key",
            path.display()
        );
    }
    let (code, text) = s.verify_signed();
    assert_eq!(
        code, 0,
        "checked with the public half kept in the data directory: {text}"
    );
    let shown = stdout_text(&s.docket(Some(place), &["keys", "show"]));
    assert!(
        text.contains(shown.trim().split('+').next().expect("name")),
        "{text}"
    );

    // The key's file gone: the run still completes, the warning names the file, the run
    // stays unsealed until the key is back.
    let kept = s.root.join("kept.key");
    std::fs::rename(&key_file, &kept).expect("move the key away");
    let stderr = s.run(Some(place));
    assert!(
        stderr.contains("warning") && stderr.contains(place),
        "{stderr}"
    );
    let (code, text) = s.verify_signed();
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("is not sealed at its"), "{text}");
    std::fs::rename(&kept, &key_file).expect("the key back");
    s.run(Some(place));
    let (code, text) = s.verify_signed();
    assert_eq!(
        code, 0,
        "sealed by the next command that drives runs: {text}"
    );
    assert!(text.contains("run heads  3 seals"), "{text}");
}

#[test]
fn a_key_given_to_the_process_signs_and_is_written_nowhere_nor_quoted() {
    let s = Setup::new();
    // A key made elsewhere (another data directory's), given as the secret store would.
    let elsewhere = s.root.join("elsewhere");
    let out = Command::new(docket_bin())
        .args([
            "keys",
            "generate",
            "--name",
            "vault.example/docket",
            "--data",
        ])
        .arg(&elsewhere)
        .env_remove("DOCKET_SIGNING_KEY")
        .output()
        .expect("docket runs");
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let private = std::fs::read_to_string(elsewhere.join("keys/signer.key")).expect("key");
    let private = private.trim();
    s.run(Some(private));
    let secret = key_data(private);
    for (path, bytes) in docket_tests::files_under(&s.data) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{} holds the private key",
            path.display()
        );
    }
    let (code, text) = s.verify_signed();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("sealed by vault.example/docket+"), "{text}");

    // A damaged key is refused before anything runs, without being quoted.
    let damaged = format!("{}x", &private[..private.len() - 2]);
    let out = s.docket(Some(&damaged), &["runs"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(&out), 2, "{stderr}");
    assert!(stderr.contains("DOCKET_SIGNING_KEY"), "{stderr}");
    assert!(
        !stderr.contains(&damaged[20..]),
        "the key is quoted: {stderr}"
    );
}

#[test]
fn signing_turned_off_makes_a_store_without_a_key() {
    let s = Setup::new();
    let stderr = s.run(Some("none"));
    assert!(!stderr.contains("signing key made"), "{stderr}");
    assert!(!s.data.join("keys").exists());
    let out = s.docket(None, &["verify"]);
    assert_eq!(exit_code(&out), 0);
    assert!(
        stdout_text(&out).contains("unsigned"),
        "{}",
        stdout_text(&out)
    );
    let (code, _) = s.verify_signed();
    assert_eq!(code, 1);
    let out = s.docket(Some("none"), &["keys", "generate"]);
    assert_eq!(exit_code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DOCKET_SIGNING_KEY=none"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_witness_command_is_handed_the_heads_checkpoint_the_log_holds() {
    let s = Setup::new();
    s.run(None);
    let witness = s.root.join("witness");
    std::fs::create_dir_all(&witness).expect("witness dir");
    let command = format!(
        "cat > {}/\"$DOCKET_CHECKPOINT_FILE\" && echo \"$DOCKET_CHECKPOINT_ORIGIN $DOCKET_CHECKPOINT_SIZE\" > {}/said",
        witness.display(),
        witness.display()
    );
    let out = s.docket(None, &["checkpoint", "publish", "--command", &command]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let held = std::fs::read_to_string(s.data.join("checkpoints/heads.note")).expect("heads");
    let kept = std::fs::read_to_string(witness.join("heads-1.note")).expect("handed over");
    assert_eq!(kept, held);
    let said = std::fs::read_to_string(witness.join("said")).expect("said");
    let origin = held.lines().next().expect("origin");
    assert_eq!(said.trim(), format!("{origin} 1"));
    // What the witness kept is what `verify --against` holds the log to.
    let out = s.docket(
        None,
        &["verify", "--against", witness.to_str().expect("utf-8")],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    // A witness that fails: exit 1, and the command says the checkpoint is not kept.
    let out = s.docket(None, &["checkpoint", "publish", "--command", "exit 7"]);
    assert_eq!(exit_code(&out), 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("exited with 7") && stderr.contains("not known to be kept"),
        "{stderr}"
    );
}

/// The key data of a private key (`PRIVATE+KEY+NAME+HASH+DATA`, C2SP signed-note keys):
/// everything after the fourth `+`, since the base64 itself may hold `+` (the text after
/// the last one can be a few letters, found by chance in any log).
fn key_data(private: &str) -> &str {
    private
        .splitn(5, '+')
        .nth(4)
        .expect("PRIVATE+KEY+NAME+HASH+DATA")
}
