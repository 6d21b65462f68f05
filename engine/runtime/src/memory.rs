//! How the process's memory is backed.
//!
//! With many runs live at once, the heap grows by hundreds of megabytes of small JSON
//! values. When the allocator's regions are backed by transparent huge pages, every first
//! touch of a 2 MiB region makes the kernel zero all of it, much of which no run uses:
//! in `engine_pipeline`, a third of the process's CPU was the kernel clearing such pages
//! (bench/RESULTS.md, engine_pipeline). Ordinary
//! 4 KiB pages are zeroed only where they are touched.

/// Asks the kernel not to back this process's memory with transparent huge pages (Linux's
/// `PR_SET_THP_DISABLE`; inherited by child processes). Call it first thing in `main`.
/// Elsewhere it does nothing.
///
/// # Errors
/// The kernel's refusal (a kernel without the setting): the process then runs as before.
pub fn prefer_small_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::thread::disable_transparent_huge_pages(true)?;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_setting_is_the_process_s_after_the_call() {
        super::prefer_small_pages().expect("prctl");
        assert!(rustix::thread::transparent_huge_pages_are_disabled().expect("prctl"));
    }
}
