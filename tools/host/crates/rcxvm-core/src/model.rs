// SPDX-License-Identifier: GPL-2.0

//! A model of mainline's `mprotect()` of one whole VMA, under the mmap
//! write lock (Linux 6.12: `do_mprotect_pkey()`, `mprotect_fixup()`,
//! `vma_modify_flags()` -> `vma_merge_existing_range()` in `mm/vma.c`).
//!
//! An address space is a sorted list of [`Vma`]s with the fields a merge
//! looks at.  [`mprotect`] computes the new flags, makes the checks, adjusts
//! `VM_ACCOUNT`, and then merges the VMA into its neighbours when their
//! flags and everything else allow it, or else changes its flags in place.
//! It is written from the behaviour of those functions, for tests: no
//! locking, no page tables, no errors besides the checks.

use crate::{vm, HostFlags};

/// Base pages of the model.
pub const PAGE: usize = 4096;

/// A VMA as a merge sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    /// First address.
    pub start: usize,
    /// First address past it.
    pub end: usize,
    /// `vm_flags`.
    pub flags: HostFlags,
    /// `vm_pgoff`, in pages.
    pub pgoff: usize,
    /// `anon_vma`, by identity.
    pub anon_vma: Option<u8>,
    /// `anon_vma_chain` has exactly one entry (not inherited by fork).
    pub chain_singular: bool,
    /// Memory policy, by identity.
    pub policy: u8,
    /// Anonymous name, by identity.
    pub name: u8,
    /// userfaultfd context, by identity.
    pub uffd_ctx: u8,
    /// Has `vm_ops` (so is not anonymous).
    pub ops: bool,
    /// Its `vm_ops` have a `close` (a merge may not remove it).
    pub close: bool,
    /// The file, by identity.
    pub file: Option<u8>,
}

impl Vma {
    /// Pages.
    pub fn pages(&self) -> usize {
        (self.end - self.start) / PAGE
    }

    /// `vma_is_anonymous()`.
    pub fn anonymous(&self) -> bool {
        !self.ops
    }
}

/// An `mprotect()` call's protection bits and the task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prot {
    /// `PROT_READ`.
    pub read: bool,
    /// `PROT_WRITE`.
    pub write: bool,
    /// `PROT_EXEC`.
    pub exec: bool,
    /// `READ_IMPLIES_EXEC`.
    pub read_implies_exec: bool,
    /// `MMF_HAS_MDWE`.
    pub mdwe: bool,
}

/// Why the model's `mprotect()` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// `-EACCES`: `VM_MAY*` or MDWE.
    Access,
    /// `-EPERM`: sealed.
    Perm,
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The flags were already right.
    Unchanged,
    /// The flags changed in place.
    InPlace,
    /// The VMA merged into a neighbour (or both).
    Merged,
}

/// `is_mergeable_anon_vma()`: two `anon_vma`s allow a merge when one is
/// missing (and the VMA the other belongs to, if given, has not inherited
/// it) or when they are the same.
pub fn anon_vmas_mergeable(a: Option<u8>, b: Option<u8>, owner_singular: Option<bool>) -> bool {
    if (a.is_none() || b.is_none()) && owner_singular.unwrap_or(true) {
        return true;
    }
    a == b
}

/// `is_mergeable_vma()` for `neighbour` and a VMA-to-be with `flags` and
/// `vma`'s other attributes.
fn attrs_mergeable(neighbour: &Vma, vma: &Vma, flags: HostFlags) -> bool {
    neighbour.policy == vma.policy
        && (neighbour.flags.0 ^ flags.0) & !vm::VM_SOFTDIRTY == 0
        && neighbour.file == vma.file
        && neighbour.uffd_ctx == vma.uffd_ctx
        && neighbour.name == vma.name
}

/// `can_vma_merge_after()`: `vma` (with `flags`) may extend `prev`.
pub fn can_merge_after(prev: &Vma, vma: &Vma, flags: HostFlags) -> bool {
    attrs_mergeable(prev, vma, flags)
        && anon_vmas_mergeable(vma.anon_vma, prev.anon_vma, Some(prev.chain_singular))
        && prev.pgoff + prev.pages() == vma.pgoff
}

/// `can_vma_merge_before()`: `vma` (with `flags`) may extend `next` down.
pub fn can_merge_before(next: &Vma, vma: &Vma, flags: HostFlags) -> bool {
    attrs_mergeable(next, vma, flags)
        && anon_vmas_mergeable(vma.anon_vma, next.anon_vma, Some(next.chain_singular))
        && next.pgoff == vma.pgoff + vma.pages()
}

/// The flags `do_mprotect_pkey()` computes for `old` (no protection key).
pub fn new_flags(old: HostFlags, prot: &Prot) -> HostFlags {
    let exec = prot.exec || (prot.read_implies_exec && prot.read && old.has(vm::VM_MAYEXEC));
    let mut f = old.0 & !(vm::VM_READ | vm::VM_WRITE | vm::VM_EXEC);
    if prot.read {
        f |= vm::VM_READ;
    }
    if prot.write {
        f |= vm::VM_WRITE;
    }
    if exec {
        f |= vm::VM_EXEC;
    }
    HostFlags(f)
}

/// Mainline's `mprotect()` of the whole of `space[i]` (flags without a
/// protection key).
pub fn mprotect(space: &mut Vec<Vma>, i: usize, prot: &Prot) -> Result<Outcome, Error> {
    let old = space[i].flags;
    let mut new = new_flags(old, prot);
    // do_mprotect_pkey(): VM_MAY* bits, then MDWE.
    let access = vm::VM_READ | vm::VM_WRITE | vm::VM_EXEC;
    if new.0 & !(new.0 >> 4) & access != 0 {
        return Err(Error::Access);
    }
    if prot.mdwe && new.has(vm::VM_EXEC) && (new.has(vm::VM_WRITE) || !old.has(vm::VM_EXEC)) {
        return Err(Error::Access);
    }
    // mprotect_fixup(): mseal first, then the no-op.
    if old.has(vm::VM_SEALED) {
        return Err(Error::Perm);
    }
    if new == old {
        return Ok(Outcome::Unchanged);
    }
    let exempt = vm::VM_ACCOUNT | vm::VM_WRITE | vm::VM_HUGETLB | vm::VM_SHARED | vm::VM_NORESERVE;
    if new.has(vm::VM_WRITE) {
        if !old.has(exempt) {
            new.0 |= vm::VM_ACCOUNT;
        }
    } else if old.has(vm::VM_ACCOUNT) && space[i].anonymous() && space[i].anon_vma.is_none() {
        new.0 &= !vm::VM_ACCOUNT;
    }

    // vma_merge_existing_range() with the whole VMA.
    let vma = space[i].clone();
    let prev = i.checked_sub(1).map(|p| space[p].clone());
    let next = space.get(i + 1).cloned();
    let merge_left = prev
        .as_ref()
        .is_some_and(|p| p.end == vma.start && can_merge_after(p, &vma, new));
    let mut merge_right = next.as_ref().is_some_and(|n| {
        vma.end == n.start
            && can_merge_before(n, &vma, new)
            && (!merge_left
                || anon_vmas_mergeable(prev.as_ref().unwrap().anon_vma, n.anon_vma, None))
    });
    if new.has(vm::VM_SPECIAL) || !(merge_left || merge_right) || vma.close {
        space[i].flags = new;
        return Ok(Outcome::InPlace);
    }
    // Both sides, but next may not be removed: merge with prev only.
    if merge_left && merge_right && next.as_ref().unwrap().close {
        merge_right = false;
    }
    let anon = |a: Option<u8>, b: Option<u8>| a.or(b);
    if merge_left && merge_right {
        let n = space.remove(i + 1);
        space.remove(i);
        let p = &mut space[i - 1];
        p.end = n.end;
        p.anon_vma = anon(anon(p.anon_vma, vma.anon_vma), n.anon_vma);
        p.flags = new;
    } else if merge_left {
        space.remove(i);
        let p = &mut space[i - 1];
        p.end = vma.end;
        p.anon_vma = anon(p.anon_vma, vma.anon_vma);
        p.flags = new;
    } else {
        space.remove(i);
        let n = &mut space[i];
        n.start = vma.start;
        n.pgoff = vma.pgoff;
        n.anon_vma = anon(n.anon_vma, vma.anon_vma);
        n.flags = new;
    }
    Ok(Outcome::Merged)
}
