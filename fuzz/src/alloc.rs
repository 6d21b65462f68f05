//! A counting global allocator: the bytes live now, the peak since the last reset, and a
//! hard cap past which an allocation is refused (the process then aborts with Rust's
//! "memory allocation failed" rather than taking the machine's memory).
//!
//! The harness binary installs [`Counting`] as its `#[global_allocator]`; every thread's
//! allocations count (a case's background work, such as the API's runs, included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Live bytes past which an allocation is refused; `usize::MAX` until [`set_cap`].
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The system allocator, counting.
pub struct Counting;

// SAFETY: every call is forwarded to `System` with the same layout and pointer; the
// counters only observe sizes.
#[expect(
    unsafe_code,
    reason = "a global allocator is an unsafe trait; it only forwards to System"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: a pointer this allocator gave out, with its layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !reserve(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: a pointer this allocator gave out, with its layout and the new size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            LIVE.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Counts `size` more live bytes, unless that passes the cap.
fn reserve(size: usize) -> bool {
    let live = LIVE.fetch_add(size, Ordering::Relaxed).saturating_add(size);
    if live > CAP.load(Ordering::Relaxed) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
        return false;
    }
    PEAK.fetch_max(live, Ordering::Relaxed);
    true
}

/// Bytes allocated and not yet freed.
#[must_use]
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes live at once since the last [`reset_peak`].
#[must_use]
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts measuring a new peak from the bytes live now.
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

/// Refuses any allocation that would take the live bytes past `bytes`.
pub fn set_cap(bytes: usize) {
    CAP.store(bytes, Ordering::Relaxed);
}
