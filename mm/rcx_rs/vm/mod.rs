// SPDX-License-Identifier: GPL-2.0

//! RCXVM: `mprotect()` of one whole private anonymous VMA under the mmap
//! read lock, the VMA held for writing and its neighbours checked in one
//! RCX update (`Documentation/mm/rcx.rst`, "RCXVM").
//!
//! - `decide`: the pure decision, shared with the host tier, which tests
//!   it against a model of mainline's merges;
//! - `fast`: the fast path `do_mprotect_pkey()` calls behind the
//!   fast-path key (`include/linux/rcxvm.h`), with the RCX commit;
//! - the decision's flags are `kernel::mm::virt::VmFlags`, whose
//!   predicates it uses;
//! - the exclusive hold is `kernel::mm::virt::VmaWriteHold`, made from the
//!   mmap read guard.
//!
//! The static keys, the counters and the calls into mainline that need C
//! (the mmu_gather, the LSM hook) are in `mm/rcx_rs/rcxvm.c`.

use kernel::mm::virt::VmFlags;

pub(crate) mod decide;
pub(crate) mod fast;

#[cfg(CONFIG_RCX_KUNIT_TEST)]
mod tests;

impl decide::Flags for VmFlags {
    const WRITE: Self = VmFlags::WRITE;
    const EXEC: Self = VmFlags::EXEC;
    const MAYEXEC: Self = VmFlags::MAYEXEC;
    const SHARED_ANY: Self = VmFlags::SHARED.union(VmFlags::MAYSHARE);
    const HUGETLB: Self = VmFlags::HUGETLB;
    const SPECIAL: Self = VmFlags::SPECIAL;
    const LOCKED_ANY: Self = VmFlags::LOCKED_ANY;
    const UFFD_ARMED: Self = VmFlags::UFFD_ARMED;
    const MERGEABLE: Self = VmFlags::MERGEABLE;
    const GROWS: Self = VmFlags::GROWS;
    const PROT_CLEAR: Self = VmFlags::PROT_CLEAR;
    const SHADOW_STACK: Self = VmFlags::SHADOW_STACK;
    const DROPPABLE: Self = VmFlags::DROPPABLE;
    const SEALED: Self = VmFlags::SEALED;
    const ACCOUNT: Self = VmFlags::ACCOUNT;
    const NORESERVE: Self = VmFlags::NORESERVE;

    fn intersects(self, other: Self) -> bool {
        VmFlags::intersects(self, other)
    }

    fn with_prot(self, read: bool, write: bool, exec: bool) -> Self {
        let pick = |on: bool, f: VmFlags| if on { f } else { VmFlags::from_bits(0) };
        let access = pick(read, VmFlags::READ)
            .union(pick(write, VmFlags::WRITE))
            .union(pick(exec, VmFlags::EXEC));
        self.with_access(access)
    }

    fn access_allowed(self) -> bool {
        VmFlags::access_allowed(self)
    }

    fn merge_equal(self, other: Self) -> bool {
        VmFlags::merge_equal(self, other)
    }

    fn is_data(self) -> bool {
        VmFlags::is_data(self)
    }

    fn is_exec(self) -> bool {
        VmFlags::is_exec(self)
    }
}
