// SPDX-License-Identifier: GPL-2.0

//! DMEM's verify mode (`CONFIG_GCMA_DMEM_VERIFY`): every hit is checked
//! against the device it stands for.
//!
//! After DMEM fills a folio, the hook reads the same page back from the
//! device (`kernel::mm::gcma::verify`, which makes the reads) and
//! compares.  A mismatch is a stale copy, a DMEM bug: it is counted,
//! logged with the key, the range of bytes that differ and both CRC32s,
//! reported as a kernel warning (the first ten of each client, then every
//! thousandth), and the reader gets the device's bytes.  A hit that cannot
//! be read back is counted as skipped and served as it is.  The counters
//! are
//! `/sys/kernel/mm/gcma/dmem/<client>/verified`, `verify_mismatches` and
//! `verify_skipped`.
//!
//! `verify_inject`, next to them, is the mode's self-test: the next hits
//! it names that can be read back have one byte of their copy flipped
//! before the comparison ([`read_back`]), which must find each and
//! undo it (scenario `gcma_dmem_verify`).

use core::{
    fmt,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    delay::MaySleep,
    ffi::c_uint,
    mm::{
        folio::UnreadFolio,
        gcma::verify::{self as device, DeviceCopy},
        page_access::ExclusivePage,
    },
    prelude::*,
    processor,
};

/// DMEM clients (`enum gcma_dmem_client`).
const NR_CLIENTS: usize = bindings::gcma_dmem_client_GCMA_DMEM_NR_CLIENTS as usize;

/// Mismatches of a client reported in full; after them, every
/// [`REPORT_EVERY`]th.
const REPORT_FIRST: u64 = 10;
const REPORT_EVERY: u64 = 1000;

/// A client's counters.
struct Counters {
    verified: AtomicU64,
    mismatches: AtomicU64,
    skipped: AtomicU64,
}

static COUNTERS: [Counters; NR_CLIENTS] = [const {
    Counters {
        verified: AtomicU64::new(0),
        mismatches: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
    }
}; NR_CLIENTS];

/// Turns verify mode on unless `gcma.dmem_verify=` turned it off: called
/// by `gcma_rs_init()` before DMEM's clients start, so that their first
/// hit is checked.  Sleeps, which `ctx` allows.
pub(crate) fn init(ctx: &MaySleep) {
    if crate::boot_params::verify_enabled() {
        device::enable(ctx);
        pr_info!("dmem: verify mode on: every hit is checked against the device\n");
    }
}

/// The counters of client `client` (`enum gcma_dmem_client`): hits that
/// matched the device, hits that did not, hits that could not be checked;
/// zeros for an unknown client.
pub(crate) fn counts(client: c_uint) -> [u64; 3] {
    COUNTERS.get(client as usize).map_or([0; 3], |c| {
        [
            c.verified.load(Ordering::Relaxed),
            c.mismatches.load(Ordering::Relaxed),
            c.skipped.load(Ordering::Relaxed),
        ]
    })
}

/// CRC32 (little-endian, as the kernel's `crc32_le(~0, ...)`) of `bytes`,
/// for the report of a mismatch only.
fn crc32_le(bytes: &[u8]) -> u32 {
    bytes.iter().fold(!0u32, |mut c, &b| {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg());
        }
        c
    })
}

/// Compares `copy`, what DMEM gave the reader, with `dev`, what the device
/// holds; on a mismatch reports it, naming `what`, and gives `copy` the
/// device's bytes.
fn compare(
    client: c_uint,
    mut copy: ExclusivePage<'_>,
    dev: &DeviceCopy,
    what: fmt::Arguments<'_>,
) {
    let Some(c) = COUNTERS.get(client as usize) else {
        return;
    };
    let dev = dev.page();
    // The range of bytes that differ and both CRC32s; `None` if none does.
    let diff = copy.as_shared().with_bytes(|a| {
        dev.with_bytes(|b| {
            // The whole pages first (`memcmp()`): the common case.
            if a == b {
                return None;
            }
            let first = a.iter().zip(b.iter()).position(|(x, y)| x != y)?;
            let last = a.iter().zip(b.iter()).rposition(|(x, y)| x != y)?;
            Some((first, last, crc32_le(a), crc32_le(b)))
        })
    });
    let Some((first, last, crc_copy, crc_dev)) = diff else {
        c.verified.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let n = c.mismatches.fetch_add(1, Ordering::Relaxed) + 1;
    copy.copy_from_page(&dev);
    // A stale copy is a bug; the first ones are reported in full, and a
    // storm of them does not flood the log.
    if n <= REPORT_FIRST || n % REPORT_EVERY == 0 {
        pr_err!(
            "dmem: stale {}: bytes {}-{} differ; copy crc32 {:08x}, device crc32 {:08x}; the device's bytes are returned\n",
            what,
            first,
            last,
            crc_copy,
            crc_dev
        );
        processor::warn();
    }
}

/// What a read back gave for a hit of `client` in `folio`: the device's
/// bytes, with the self-test's flip applied to the copy now that they are
/// in hand; `None`, counted as skipped, if the hit cannot be checked.
fn read_back(
    client: c_uint,
    folio: &mut UnreadFolio<'_>,
    dev: Option<DeviceCopy>,
) -> Option<DeviceCopy> {
    let Some(dev) = dev else {
        if let Some(c) = COUNTERS.get(client as usize) {
            c.skipped.fetch_add(1, Ordering::Relaxed);
        }
        return None;
    };
    inject_stale(client, folio.first_page());
    Some(dev)
}

/// Checks a page-cache hit: `folio` was just filled by DMEM for the file
/// on the device numbered `sb`, inode `ino`.  Sleeps for the read.
pub(crate) fn file(folio: &mut UnreadFolio<'_>, sb: u32, ino: u64) {
    let client = bindings::gcma_dmem_client_GCMA_DMEM_FILE;
    let dev = device::read_file(folio);
    let Some(dev) = read_back(client, folio, dev) else {
        return;
    };
    let f = folio.folio();
    let index = f.index();
    let size = f
        .mapping()
        .and_then(|m| m.host())
        .map_or(-1, |inode| inode.size());
    compare(
        client,
        folio.first_page(),
        &dev,
        format_args!(
            "file page: dev {}:{} ino {} index {} (size {})",
            sb >> 20,
            sb & 0xf_ffff,
            ino,
            index,
            size
        ),
    );
}

/// Checks a swap hit: `folio` was just filled by DMEM for its swap slot.
/// Sleeps for the read.
pub(crate) fn swap(folio: &mut UnreadFolio<'_>) {
    let client = bindings::gcma_dmem_client_GCMA_DMEM_SWAP;
    let dev = device::read_swap(folio);
    let Some(dev) = read_back(client, folio, dev) else {
        return;
    };
    let (swap_type, offset) = folio.folio().swap_slot();
    compare(
        client,
        folio.first_page(),
        &dev,
        format_args!("swap page: type {} offset {}", swap_type, offset),
    );
}

/// Hits of each client still to be made stale on purpose, verify mode's
/// self-test (`/sys/kernel/mm/gcma/dmem/<client>/verify_inject`).
static INJECT: [AtomicUsize; NR_CLIENTS] = [const { AtomicUsize::new(0) }; NR_CLIENTS];

/// The self-test's hits of client `client` not made yet.
pub(crate) fn injections_pending(client: c_uint) -> usize {
    INJECT
        .get(client as usize)
        .map_or(0, |n| n.load(Ordering::Relaxed))
}

/// Makes the next `n` hits of client `client` stale on purpose: one byte
/// of the copy is flipped before verify mode compares it with the device,
/// which must find it, count it, warn, and give the reader the device's
/// bytes.  `EINVAL` for an unknown client or while verify mode is off
/// (the reader would get the flipped byte).
pub(crate) fn inject(client: c_uint, n: usize) -> Result {
    let slot = INJECT.get(client as usize).ok_or(EINVAL)?;
    if !device::is_on() {
        return Err(EINVAL);
    }
    slot.store(n, Ordering::Relaxed);
    Ok(())
}

/// Flips one byte of `page`, the copy a hit of `client` just gave, if the
/// self-test asked for it.  Called only once the device's bytes were read
/// back, so that the comparison that follows undoes the flip.
fn inject_stale(client: c_uint, mut page: ExclusivePage<'_>) {
    use core::sync::atomic::Ordering::Relaxed;
    let Some(slot) = INJECT.get(client as usize) else {
        return;
    };
    if slot.load(Relaxed) == 0
        || slot
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .is_err()
    {
        return;
    }
    let at = kernel::mm::PAGE_SIZE / 2;
    let mut byte = [0u8];
    if page.read_into(at, &mut byte).is_ok() {
        byte[0] ^= 0xff;
        let _ = page.write_from(at, &byte);
    }
}
