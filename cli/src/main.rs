//! The `docket` binary; everything lives in the library so tests can reach it.

/// mimalloc rather than the system allocator: a run builds and drops many small JSON
/// values, and glibc's malloc spent a third of the engine's CPU on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Before the heap grows: ordinary pages, not transparent huge ones (a kernel without
    // the setting leaves the process as it was).
    let _ = docket_runtime::prefer_small_pages();
    docket_cli::main()
}
