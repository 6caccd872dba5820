// SPDX-License-Identifier: GPL-2.0

//! sysfs directories and their attribute files.
//!
//! A subsystem that shows counters and switches in sysfs needs three C
//! objects per directory: a `struct kobject`, its `struct kobj_type` with a
//! release function, and attribute tables whose `show()`/`store()`
//! callbacks find their object again with `container_of()`.  This module
//! makes them from Rust:
//!
//! - [`Dir`] is a plain directory (`kobject_create_and_add()`), for example
//!   `/sys/kernel/mm/<subsystem>`, under a [`Parent`];
//! - [`FileDir<T>`] is a directory that owns a `T: Files`, whose
//!   [`Files::FILES`] lists the files: each [`Attribute`] has a name and
//!   the functions that read and write it on the `T`.  [`new_file_dir!`]
//!   makes one.
//!
//! Dropping either removes the directory (with what is in it), waiting for
//! every read or write of its files in progress, and then drops the
//! reference it holds on the kobject.  The `T` is dropped only by the
//! kobject's release function, once the last reference is gone, so a
//! callback never sees a freed `T`.  A directory meant to last for the
//! kernel's life is kept with [`Dir::leak`] or [`FileDir::leak`].  A
//! callback must not drop the directory it belongs to: the removal would
//! wait for the callback itself.
//!
//! C headers: [`include/linux/kobject.h`](srctree/include/linux/kobject.h),
//! [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h)

use crate::{
    alloc::{flags::GFP_KERNEL, KBox, KVec},
    bindings,
    delay::MaySleep,
    error::{code::*, Error, Result},
    ffi::c_char,
    str::CStr,
    sync::LockClassKey,
    types::Opaque,
};
use core::{fmt, marker::PhantomData, ptr::NonNull};

/// A directory that a new directory can be made in.
///
/// # Invariants
///
/// `kobj` points to a kobject that is in sysfs and stays there for `'a`.
#[derive(Clone, Copy)]
pub struct Parent<'a> {
    kobj: NonNull<bindings::kobject>,
    _dir: PhantomData<&'a ()>,
}

impl Parent<'_> {
    /// Makes a parent of a kobject that C code or [`Dir::leak`] keeps.
    ///
    /// # Safety
    ///
    /// `kobj` points to a kobject that is in sysfs and stays there for the
    /// lifetime of the result.
    pub unsafe fn from_raw(kobj: *mut bindings::kobject) -> Self {
        // INVARIANT: the caller's contract.
        Self {
            // SAFETY: the kobject exists, so the pointer is not NULL.
            kobj: unsafe { NonNull::new_unchecked(kobj) },
            _dir: PhantomData,
        }
    }
}

impl Parent<'static> {
    /// `/sys/kernel/mm`, or `ENOENT` before the mm core has made it (it
    /// does so in a `postcore_initcall`, or never if that failed).
    pub fn mm() -> Result<Self> {
        // SAFETY: reading the pointer copies it; `mm_sysfs_init()` writes it
        // once, and NULL (not made yet, or never) is refused below.
        let kobj = NonNull::new(unsafe { bindings::mm_kobj }).ok_or(ENOENT)?;
        // INVARIANT: `/sys/kernel/mm` is never removed.
        Ok(Self {
            kobj,
            _dir: PhantomData,
        })
    }
}

/// A directory in sysfs with no files of its own (a kobject made by
/// `kobject_create_and_add()`).
///
/// # Invariants
///
/// `kobj` points to a kobject in sysfs of which `self` owns one reference.
pub struct Dir {
    kobj: NonNull<bindings::kobject>,
}

// SAFETY: a kobject's reference count is atomic, and its last put may
// happen on any thread.
unsafe impl Send for Dir {}
// SAFETY: `&Dir` only lends the kobject as a parent, which any thread may
// do at the same time.
unsafe impl Sync for Dir {}

impl Dir {
    /// Makes directory `name` in `parent`.  Fails with `ENOMEM` when it
    /// cannot be made: `kobject_create_and_add()` gives no reason (it logs
    /// one), which may also be that `parent` already has an entry `name`.
    /// May sleep.
    pub fn new(name: &CStr, parent: Parent<'_>) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string and `parent` a kobject
        // in sysfs (type invariant); the new kobject takes a reference on
        // its parent, so the parent outlives it.
        let kobj =
            unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), parent.kobj.as_ptr()) };
        // INVARIANT: a non-NULL result is a new kobject in sysfs, with the
        // one reference that is returned.
        NonNull::new(kobj).map(|kobj| Self { kobj }).ok_or(ENOMEM)
    }

    /// Returns the directory as a parent for new ones.
    pub fn as_parent(&self) -> Parent<'_> {
        // INVARIANT: `self` holds a reference for as long as it is borrowed.
        Parent {
            kobj: self.kobj,
            _dir: PhantomData,
        }
    }

    /// Keeps the directory for the kernel's life, and returns it as a
    /// parent.
    pub fn leak(self) -> Parent<'static> {
        let kobj = self.kobj;
        core::mem::forget(self);
        // INVARIANT: the reference `self` owned is never dropped.
        Parent {
            kobj,
            _dir: PhantomData,
        }
    }

    /// Returns the kobject, for C code that adds files or directories of
    /// its own.  It stays valid while `self` does.
    pub fn as_ptr(&self) -> *mut bindings::kobject {
        self.kobj.as_ptr()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference (type invariant), which keeps
        // the kobject alive for the removal and is then dropped.
        unsafe {
            bindings::kobject_del(self.kobj.as_ptr());
            bindings::kobject_put(self.kobj.as_ptr());
        }
    }
}

/// How a file of a [`FileDir<T>`] is read: writes its text to the output.
pub type ShowFn<T> = fn(&T, &mut Emitter<'_>) -> Result;

/// How a file of a [`FileDir<T>`] is written: takes the bytes written (a
/// trailing newline included), in process context, where the token lets
/// it sleep.  On success the whole write counts as done.
pub type StoreFn<T> = fn(&T, &[u8], &MaySleep) -> Result;

/// One file of a [`FileDir<T>`]: its name, and the functions that read and
/// write it.  An error they return is what `read()` or `write()` returns.
pub struct Attribute<T> {
    name: &'static CStr,
    show: ShowFn<T>,
    store: Option<StoreFn<T>>,
}

impl<T> Attribute<T> {
    /// A file that can be read (mode 0444).
    pub const fn read_only(name: &'static CStr, show: ShowFn<T>) -> Self {
        Self {
            name,
            show,
            store: None,
        }
    }

    /// A file that can be read, and written by root (mode 0644).
    pub const fn read_write(name: &'static CStr, show: ShowFn<T>, store: StoreFn<T>) -> Self {
        Self {
            name,
            show,
            store: Some(store),
        }
    }

    fn mode(&self) -> bindings::umode_t {
        if self.store.is_some() {
            0o644
        } else {
            0o444
        }
    }
}

/// An object whose state the files of a [`FileDir`] show and set.
///
/// The files' functions run in process context, may sleep, and may run on
/// several CPUs at once, for the same file too.
pub trait Files: Sized + Send + Sync + 'static {
    /// The directory's files.
    const FILES: &'static [Attribute<Self>];
}

/// The output of a file being read: formatted text, cut off at the end of
/// its buffer, which for sysfs is a page less one byte, as `sysfs_emit()`
/// cuts it.  Writing to it never fails: what does not fit is dropped.
///
/// # Examples
///
/// ```
/// use core::fmt::Write;
/// use kernel::sysfs::Emitter;
///
/// let mut buf = [0u8; 8];
/// let mut out = Emitter::new(&mut buf);
/// writeln!(out, "{}", 42).unwrap();
/// assert_eq!(out.as_bytes(), b"42\n");
/// writeln!(out, "{}", 123456789).unwrap();
/// assert_eq!(out.as_bytes(), b"42\n12345");
/// assert!(out.is_truncated());
/// ```
pub struct Emitter<'a> {
    buf: &'a mut [u8],
    len: usize,
    truncated: bool,
}

impl<'a> Emitter<'a> {
    /// An empty output that fills `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            len: 0,
            truncated: false,
        }
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether some output did not fit and was dropped.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Write for Emitter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        self.truncated |= n < s.len();
        Ok(())
    }
}

/// The allocation behind a [`FileDir`]: the kobject, the C tables that
/// describe its files, and the object they show.
///
/// # Invariants
///
/// Once `FileDir::new()` has initialised the kobject, the allocation is a
/// leaked [`KBox`] owned by the kobject's references: the kobject's
/// release function ([`FileDir::release`]) frees it, and nothing moves it.
/// `ktype`, `group` and `groups` point into the allocation and to
/// `attrs`, whose buffer does not move either (it is never resized).
#[repr(C)]
struct Inner<T: Files> {
    // First, so that a pointer to the kobject is one to the whole.
    kobj: Opaque<bindings::kobject>,
    ktype: Opaque<bindings::kobj_type>,
    group: Opaque<bindings::attribute_group>,
    groups: Opaque<[*const bindings::attribute_group; 2]>,
    attrs: KVec<Opaque<bindings::attribute>>,
    // NULL-terminated, as `attribute_group.attrs` must be.
    attr_ptrs: KVec<*mut bindings::attribute>,
    data: T,
}

/// A directory in sysfs whose files show and set the state of a `T`.
///
/// # Examples
///
/// ```
/// use core::fmt::Write;
/// use core::sync::atomic::{AtomicU64, Ordering};
/// use kernel::sysfs::{Attribute, Emitter, Files, Parent};
/// use kernel::{c_str, delay::MaySleep, new_file_dir, prelude::*};
///
/// struct Counter(AtomicU64);
///
/// fn show_count(c: &Counter, out: &mut Emitter<'_>) -> Result {
///     writeln!(out, "{}", c.0.load(Ordering::Relaxed))?;
///     Ok(())
/// }
///
/// fn reset(c: &Counter, input: &[u8], _ctx: &MaySleep) -> Result {
///     if input != b"1\n" && input != b"1" {
///         return Err(EINVAL);
///     }
///     c.0.store(0, Ordering::Relaxed);
///     Ok(())
/// }
///
/// impl Files for Counter {
///     const FILES: &'static [Attribute<Self>] = &[
///         Attribute::read_only(c_str!("count"), show_count),
///         Attribute::read_write(c_str!("reset"), show_count, reset),
///     ];
/// }
///
/// let name = c_str!("rust_sysfs_doctest");
/// let dir = new_file_dir!(name, Parent::mm()?, Counter(AtomicU64::new(7)))?;
/// assert_eq!(dir.data().0.load(Ordering::Relaxed), 7);
/// // Dropping `dir` removes /sys/kernel/mm/rust_sysfs_doctest: the name is
/// // free again.
/// drop(dir);
/// let again = new_file_dir!(name, Parent::mm()?, Counter(AtomicU64::new(0)))?;
/// # drop(again);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `inner` points to an initialised [`Inner<T>`] whose kobject is in sysfs
/// and of which `self` owns one reference.
pub struct FileDir<T: Files> {
    inner: NonNull<Inner<T>>,
}

// SAFETY: the kobject's reference count is atomic and its last put, which
// drops the `T`, may happen on any thread: `T: Send`.
unsafe impl<T: Files> Send for FileDir<T> {}
// SAFETY: `&FileDir` gives out `&T` (`T: Sync`) and the kobject as a parent.
unsafe impl<T: Files> Sync for FileDir<T> {}

impl<T: Files> FileDir<T> {
    const SYSFS_OPS: bindings::sysfs_ops = bindings::sysfs_ops {
        show: Some(Self::show),
        store: Some(Self::store),
    };

    /// Makes directory `name` in `parent`, with the files of
    /// [`T::FILES`](Files::FILES), which read and write `data`.  On failure
    /// `data` is dropped.  May sleep.
    ///
    /// Lockdep sees the files' active references (which removing the
    /// directory waits for) in the class of `key`; [`new_file_dir!`] gives
    /// each place in the source that makes directories a class of its own,
    /// as C's static attribute tables have.
    pub fn new(
        name: &CStr,
        parent: Parent<'_>,
        data: T,
        key: &'static LockClassKey,
    ) -> Result<Self> {
        let n = T::FILES.len();
        let mut attrs = KVec::with_capacity(n, GFP_KERNEL)?;
        for file in T::FILES {
            // The other fields exist with lockdep only (zeroed, then the key
            // set below): without it the update is needless.
            #[allow(clippy::needless_update, unused_mut)]
            let mut attr = bindings::attribute {
                name: file.name.as_char_ptr(),
                mode: file.mode(),
                ..Default::default()
            };
            // Lockdep takes the class of a file's active references from
            // its attribute, and needs a static key for one that is not
            // static (as `sysfs_attr_init()` gives it in C).
            #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
            {
                attr.key = key.as_ptr();
            }
            attrs.push(Opaque::new(attr), GFP_KERNEL)?;
        }
        let mut attr_ptrs = KVec::with_capacity(n + 1, GFP_KERNEL)?;
        for attr in attrs.iter() {
            attr_ptrs.push(attr.get(), GFP_KERNEL)?;
        }
        attr_ptrs.push(core::ptr::null_mut(), GFP_KERNEL)?;
        #[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
        let _ = key;
        let inner = KBox::new(
            Inner {
                kobj: Opaque::new(Default::default()),
                ktype: Opaque::uninit(),
                group: Opaque::uninit(),
                groups: Opaque::uninit(),
                attrs,
                attr_ptrs,
                data,
            },
            GFP_KERNEL,
        )?;
        let p = KBox::into_raw(inner);
        // SAFETY: `p` is a valid, unshared allocation; the tables written
        // point into it and into `attrs`' buffer, which stay where they are
        // until the release function frees them together.
        unsafe {
            (*p).group.get().write(bindings::attribute_group {
                attrs: (*p).attr_ptrs.as_mut_ptr(),
                ..Default::default()
            });
            (*p).groups
                .get()
                .write([(*p).group.get().cast_const(), core::ptr::null()]);
            (*p).ktype.get().write(bindings::kobj_type {
                release: Some(Self::release),
                sysfs_ops: &Self::SYSFS_OPS,
                default_groups: (*p).groups.get().cast(),
                ..Default::default()
            });
        }
        // SAFETY: the kobject is zeroed and its type is complete; `name` is
        // NUL-terminated and printed with "%s"; `parent` is in sysfs (type
        // invariant) and gains a reference from its new child.
        let ret = unsafe {
            bindings::kobject_init_and_add(
                (*p).kobj.get(),
                (*p).ktype.get(),
                parent.kobj.as_ptr(),
                crate::c_str!("%s").as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        if ret != 0 {
            // SAFETY: the kobject was initialised, even though adding it
            // failed: putting its one reference runs `release`, which frees
            // `p` (`kobject_init_and_add()`'s contract).
            unsafe { bindings::kobject_put((*p).kobj.get()) };
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `p` came from `KBox::into_raw()`, not NULL.
        let inner = unsafe { NonNull::new_unchecked(p) };
        // INVARIANT: the kobject is in sysfs, with one reference, ours.
        Ok(Self { inner })
    }

    /// Returns the object the files show.
    pub fn data(&self) -> &T {
        // SAFETY: `inner` is initialised and alive while `self` holds its
        // reference (type invariant).
        unsafe { &self.inner.as_ref().data }
    }

    /// Returns the directory as a parent for new ones.
    pub fn as_parent(&self) -> Parent<'_> {
        // INVARIANT: `self` holds a reference for as long as it is borrowed.
        Parent {
            // SAFETY: the kobject is the first field of a live `Inner`.
            kobj: unsafe { NonNull::new_unchecked(self.inner.as_ref().kobj.get()) },
            _dir: PhantomData,
        }
    }

    /// Keeps the directory and its `T` for the kernel's life; returns the
    /// `T`.
    pub fn leak(self) -> &'static T {
        let inner = self.inner;
        core::mem::forget(self);
        // SAFETY: the reference `self` owned is never dropped, so the
        // allocation is never freed.
        unsafe { &(*inner.as_ptr()).data }
    }

    /// # Safety
    ///
    /// `kobj` is the kobject of an initialised `Inner<T>`, alive for `'a`.
    unsafe fn inner_of<'a>(kobj: *mut bindings::kobject) -> &'a Inner<T> {
        // SAFETY: the kobject is the first field of the `#[repr(C)]`
        // `Inner<T>` (the caller's contract).
        unsafe { &*kobj.cast::<Inner<T>>() }
    }

    /// The index in `T::FILES` of the file `attr` stands for.
    fn file_of(inner: &Inner<T>, attr: *mut bindings::attribute) -> Option<usize> {
        inner.attrs.iter().position(|a| a.get() == attr)
    }

    /// `sysfs_ops.show` of every `FileDir<T>`.
    ///
    /// # Safety
    ///
    /// Called by sysfs only, which reaches these `sysfs_ops` only through
    /// the `kobj_type` of a `FileDir<T>`: `kobj` is the kobject of an
    /// `Inner<T>`, kept in sysfs while the call runs, `attr` one of its
    /// attributes and `buf` a buffer of `PAGE_SIZE` bytes.
    unsafe extern "C" fn show(
        kobj: *mut bindings::kobject,
        attr: *mut bindings::attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: sysfs removes the files, and waits for their callbacks to
        // return, before the kobject can be released.
        let inner = unsafe { Self::inner_of(kobj) };
        let Some(file) = Self::file_of(inner, attr) else {
            return EINVAL.to_errno() as isize;
        };
        // SAFETY: sysfs lends `buf`, `PAGE_SIZE` bytes, for this call.  At
        // most `PAGE_SIZE - 1` may be used: sysfs cuts a whole page short
        // and complains.
        let buf = unsafe {
            core::slice::from_raw_parts_mut(buf.cast::<u8>(), crate::page::PAGE_SIZE - 1)
        };
        let mut out = Emitter::new(buf);
        match (T::FILES[file].show)(&inner.data, &mut out) {
            Ok(()) => out.len as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// `sysfs_ops.store` of every `FileDir<T>`.
    ///
    /// # Safety
    ///
    /// As for [`Self::show`], with `buf` holding `count` bytes.
    unsafe extern "C" fn store(
        kobj: *mut bindings::kobject,
        attr: *mut bindings::attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // SAFETY: as in `show()`.
        let inner = unsafe { Self::inner_of(kobj) };
        let Some(file) = Self::file_of(inner, attr) else {
            return EINVAL.to_errno() as isize;
        };
        // A read-only file made writable with chmod: as `kobj_attr_store()`.
        let Some(store) = T::FILES[file].store else {
            return EIO.to_errno() as isize;
        };
        // SAFETY: sysfs lends `buf`, `count` bytes, for this call.
        let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        // SAFETY: sysfs calls `store()` from a write system call, holding
        // only the open file's mutex and an active reference to the node.
        let ctx = unsafe { MaySleep::new() };
        match store(&inner.data, input, &ctx) {
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// `kobj_type.release` of every `FileDir<T>`: frees the allocation,
    /// dropping the `T`.
    ///
    /// # Safety
    ///
    /// Called by the kobject core only, once, when the last reference to a
    /// kobject of this type is gone.
    unsafe extern "C" fn release(kobj: *mut bindings::kobject) {
        // SAFETY: the allocation came from `KBox::into_raw()` in `new()`,
        // and no reference to the kobject, hence to the allocation, is left.
        drop(unsafe { KBox::from_raw(kobj.cast::<Inner<T>>()) });
    }
}

impl<T: Files> Drop for FileDir<T> {
    fn drop(&mut self) {
        // Without a reference to the `Inner`: the put may free it.
        // SAFETY: `inner` is alive until the put below (type invariant).
        let kobj = Opaque::raw_get(unsafe { core::ptr::addr_of!((*self.inner.as_ptr()).kobj) });
        // SAFETY: `self` owns one reference (type invariant), which keeps
        // the kobject alive for the removal and is then dropped.
        unsafe {
            bindings::kobject_del(kobj);
            bindings::kobject_put(kobj);
        }
    }
}

/// Makes a [`FileDir`]: `new_file_dir!(name, parent, data)`, with a lockdep
/// class for its files that belongs to this place in the source.
#[macro_export]
macro_rules! new_file_dir {
    ($name:expr, $parent:expr, $data:expr $(,)?) => {
        $crate::sysfs::FileDir::new($name, $parent, $data, $crate::static_lock_class!())
    };
}
