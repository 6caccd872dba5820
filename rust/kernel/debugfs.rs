// SPDX-License-Identifier: GPL-2.0

//! debugfs directories and read-only files that show a Rust object.
//!
//! A [`Dir`] is a debugfs directory; [`Dir::read_only_file`] makes a file
//! in it whose reads call [`Show::show`] on a `&'static T`, with the
//! [`SeqFile`] of the read to write to.  A directory is removed, with what
//! is in it, when the last handle of it or of a directory made in it is
//! dropped: a subdirectory holds a reference on its parent, so the parent
//! cannot go first and take a directory with it that a handle still
//! names.  Removal waits for the reads in progress; a file that stays
//! open reads nothing more (debugfs' file proxy refuses the call), so no
//! callback runs after the removal.  A directory meant to last for the
//! kernel's life is kept by keeping a handle, in a static for instance:
//! a handle merely leaked would be memory no pointer refers to, which
//! kmemleak reports.
//!
//! As in C, a directory or file that debugfs cannot make is not an error
//! for the caller to handle: debugfs serves debugging only, and the kernel
//! goes on without the file.  A directory that could not be made holds an
//! error pointer, which every debugfs call takes and ignores.
//!
//! C headers: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h),
//! [`include/linux/seq_file.h`](srctree/include/linux/seq_file.h)

use crate::{
    alloc::flags::GFP_KERNEL,
    bindings,
    delay::MaySleep,
    error::Result,
    ffi::{c_int, c_void},
    seq_file::SeqFile,
    str::CStr,
    sync::{Arc, UniqueArc},
};
use core::{marker::PhantomData, ptr::null_mut};

/// What a read-only debugfs file shows.
pub trait Show: Sync + 'static {
    /// Writes the file's text to `m`.  Runs in process context, where
    /// `ctx` lets it sleep, once per read that finds the file's buffer
    /// empty, and again with a larger buffer when the text did not fit.
    /// An error is the read's result.
    fn show(&self, m: &SeqFile, ctx: &MaySleep) -> Result;
}

/// A debugfs directory, as [`Dir`] holds it: removed when the last
/// reference goes.
///
/// # Invariants
///
/// `dentry` is a debugfs directory that only this entry's drop removes,
/// or an error pointer.  `parent`, if any, holds the directory it is in.
struct Entry {
    dentry: *mut bindings::dentry,
    _parent: Option<Arc<Entry>>,
}

// SAFETY: a dentry may be used and removed from any task; debugfs takes
// its own locks.
unsafe impl Send for Entry {}
// SAFETY: as above; `&Entry` only reads the pointer.
unsafe impl Sync for Entry {}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: the directory is ours to remove, or an error pointer,
        // which `debugfs_remove()` ignores (type invariant).  It runs
        // before the parent's reference is dropped (fields drop after
        // this), so the parent is still there.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}

/// A debugfs directory; see the [module documentation](self).
///
/// # Examples
///
/// ```
/// use kernel::{
///     c_str,
///     debugfs::{Dir, Show},
///     delay::MaySleep,
///     prelude::*,
///     seq_file::SeqFile,
///     seq_print,
/// };
///
/// struct Answer;
///
/// impl Show for Answer {
///     fn show(&self, m: &SeqFile, _ctx: &MaySleep) -> Result {
///         seq_print!(m, "{}\n", 42);
///         Ok(())
///     }
/// }
///
/// static ANSWER: Answer = Answer;
///
/// # // Whether debugfs has `top` (and `top/sub`), looked up by name.
/// # let present = |sub: bool| {
/// #     use kernel::bindings::{debugfs_lookup, dput};
/// #     let (top, name) = (c_str!("rust_debugfs_doctest"), c_str!("sub"));
/// #     // SAFETY: FFI calls with NUL-terminated names; a dentry found comes
/// #     // with a reference, which is dropped.
/// #     unsafe {
/// #         let d = debugfs_lookup(top.as_char_ptr(), core::ptr::null_mut());
/// #         let found = if d.is_null() || !sub {
/// #             d
/// #         } else {
/// #             let s = debugfs_lookup(name.as_char_ptr(), d);
/// #             dput(d);
/// #             s
/// #         };
/// #         if !found.is_null() {
/// #             dput(found);
/// #         }
/// #         !found.is_null()
/// #     }
/// # };
/// let dir = Dir::new(c_str!("rust_debugfs_doctest"))?;
/// let sub = dir.subdir(c_str!("sub"))?;
/// sub.read_only_file(c_str!("answer"), &ANSWER);
/// # assert!(present(true));
/// // The parent goes last, with the subdirectory's handle.
/// drop(dir);
/// # assert!(present(true));
/// drop(sub);
/// # assert!(!present(false));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone)]
pub struct Dir(Arc<Entry>);

impl Dir {
    /// Makes directory `name` at the top of debugfs.  Fails only when the
    /// handle cannot be allocated.
    pub fn new(name: &CStr) -> Result<Self> {
        Self::create(name, None)
    }

    /// Makes directory `name` in `self`.  Fails only when the handle cannot
    /// be allocated.
    pub fn subdir(&self, name: &CStr) -> Result<Self> {
        Self::create(name, Some(self.0.clone()))
    }

    fn create(name: &CStr, parent: Option<Arc<Entry>>) -> Result<Self> {
        let parent_dentry = parent.as_ref().map_or(null_mut(), |p| p.dentry);
        // Allocated first: a failure then leaves nothing in debugfs.
        let slot = UniqueArc::<Entry>::new_uninit(GFP_KERNEL)?;
        // SAFETY: `name` is NUL-terminated; the parent is the top of
        // debugfs (NULL), a directory that `parent` keeps, or an error
        // pointer, which debugfs takes and ignores.
        let dentry = unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), parent_dentry) };
        // INVARIANT: a new directory, which nothing but this entry
        // removes (its parent cannot go first: the entry holds it), or an
        // error pointer.
        let entry = slot.write(Entry {
            dentry,
            _parent: parent,
        });
        Ok(Self(entry.into()))
    }

    /// Makes a read-only file `name` in `self`, each read of which shows
    /// `data`.  The file is removed with its directory.
    pub fn read_only_file<T: Show>(&self, name: &CStr, data: &'static T) {
        // SAFETY: `name` is NUL-terminated; the directory is ours or an
        // error pointer (type invariant of `Entry`).  `data` lives for
        // good and may be shared between tasks (`Show: Sync`), and the
        // operations are those of `T`, which read `i_private` as a `&T`.
        unsafe {
            bindings::debugfs_create_file(
                name.as_char_ptr(),
                0o444,
                self.0.dentry,
                core::ptr::from_ref(data).cast_mut().cast(),
                ShowFile::<T>::OPS,
            )
        };
    }
}

/// The file operations of a file that shows a `T`.
struct ShowFile<T>(PhantomData<T>);

impl<T: Show> ShowFile<T> {
    const TABLE: bindings::file_operations = {
        // SAFETY: an all-zero `file_operations` has no operations, which
        // is valid.
        let mut ops: bindings::file_operations = unsafe { core::mem::zeroed() };
        ops.open = Some(Self::open);
        ops.read = Some(bindings::seq_read);
        ops.llseek = Some(bindings::seq_lseek);
        ops.release = Some(bindings::single_release);
        ops
    };
    const OPS: &'static bindings::file_operations = &Self::TABLE;

    /// Opens the file as a `single_open()` seq file of the inode's data.
    ///
    /// # Safety
    ///
    /// Called by the VFS (through debugfs' proxy) to open a file made by
    /// [`Dir::read_only_file`] with these operations.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `inode` is the file's inode, whose `i_private` is the
        // `&'static T` given to `read_only_file()`; `file` is being
        // opened (the caller's contract).
        unsafe { bindings::single_open(file, Some(Self::show), (*inode).i_private) }
    }

    /// Shows the data of the file's seq file.
    ///
    /// # Safety
    ///
    /// Called by `seq_read()` on the seq file that [`Self::open`] made.
    unsafe extern "C" fn show(m: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
        // SAFETY: `single_open()` put the inode's data, a `&'static T`, in
        // `private`, which nothing changes.
        let data = unsafe { &*(*m).private.cast::<T>() };
        // SAFETY: `m` is the seq file of this callback, which runs with
        // the file's lock held (the caller's contract).
        let seq = unsafe { SeqFile::from_raw(m) };
        // SAFETY: `seq_read()` calls `show()` from a read system call,
        // holding only the seq file's mutex (the caller's contract).
        let ctx = unsafe { MaySleep::new() };
        match data.show(seq, &ctx) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}
