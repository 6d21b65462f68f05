//! Shared support for docket's integration tests.
//!
//! The tests themselves live in `tests/tests/*.rs`, one file per capability, and use
//! only the public API of the docket crates and the `docket` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (where `examples/` lives).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Path of an example bundle, e.g. `example("geo")`.
pub fn example(name: &str) -> PathBuf {
    workspace_root()
        .join("examples")
        .join(name)
        .join("policy.toml")
}

/// The `docket` binary, built (once per test process) into the same target directory and
/// profile as the running test. `CARGO_BIN_EXE_docket` only exists inside the `docket-cli`
/// package, so the integration-test crate asks cargo to build the binary itself; when it is
/// already up to date this is a quick no-op.
pub fn docket_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // <target>/<profile>/deps/<test-binary>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("profile directory")
            .to_path_buf();
        let target_dir = profile_dir
            .parent()
            .expect("target directory")
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "docket-cli",
            "--bin",
            "docket",
            "--target-dir",
        ])
        .arg(&target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(workspace_root())
            .status()
            .expect("run cargo build for the docket binary");
        assert!(status.success(), "building the docket binary failed");
        let bin = profile_dir.join(format!("docket{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.exists(), "{} was not built", bin.display());
        bin
    })
}
