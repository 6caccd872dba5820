// SPDX-License-Identifier: GPL-2.0

//! Host build of RCXVM's fast-path decision, `mm/rcx_rs/vm/decide.rs`,
//! compiled unchanged, with the kernel's VMA flag values (read from the
//! configured kernel tree by `build.rs`).
//!
//! [`HostFlags`] plays the part of `kernel::mm::virt::VmFlags`; the tests
//! (`src/tests.rs`) check the decision against [`model`], a model of what
//! mainline's `mprotect()` does to a whole VMA under the mmap write lock:
//! the new flags, the checks, the accounting and above all the merge of
//! `vma_merge_existing_range()`.

#[allow(dead_code)]
#[path = "../../../../../mm/rcx_rs/vm/decide.rs"]
mod decide;

pub mod model;

#[cfg(test)]
mod tests;

/// The constants and options of the kernel this crate mirrors.
pub mod kernel_config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}

/// The kernel's VMA flag values.
pub mod vm {
    include!(concat!(env!("OUT_DIR"), "/vm_flags.rs"));

    /// `VM_SEALED` (bindgen gives its bit number).
    pub const VM_SEALED: u64 = 1 << RSMM_VM_SEALED_BIT;
}

/// VMA flags, as `kernel::mm::virt::VmFlags` has them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct HostFlags(pub u64);

impl HostFlags {
    const ACCESS: u64 = vm::VM_READ | vm::VM_WRITE | vm::VM_EXEC;

    /// Whether any bit of `bits` is set.
    pub fn has(self, bits: u64) -> bool {
        self.0 & bits != 0
    }
}

impl decide::Flags for HostFlags {
    const WRITE: Self = HostFlags(vm::VM_WRITE);
    const EXEC: Self = HostFlags(vm::VM_EXEC);
    const MAYEXEC: Self = HostFlags(vm::VM_MAYEXEC);
    const SHARED_ANY: Self = HostFlags(vm::VM_SHARED | vm::VM_MAYSHARE);
    const HUGETLB: Self = HostFlags(vm::VM_HUGETLB);
    const SPECIAL: Self = HostFlags(vm::VM_SPECIAL);
    const LOCKED_ANY: Self = HostFlags(vm::VM_LOCKED_MASK);
    const UFFD_ARMED: Self =
        HostFlags(vm::VM_UFFD_MISSING | vm::VM_UFFD_WP | vm::RSMM_VM_UFFD_MINOR);
    const MERGEABLE: Self = HostFlags(vm::VM_MERGEABLE);
    const GROWS: Self = HostFlags(vm::VM_GROWSDOWN | vm::VM_GROWSUP);
    const PROT_CLEAR: Self = HostFlags(vm::RSMM_VM_FLAGS_CLEAR);
    const SHADOW_STACK: Self = HostFlags(vm::RSMM_VM_SHADOW_STACK);
    const DROPPABLE: Self = HostFlags(vm::RSMM_VM_DROPPABLE);
    const SEALED: Self = HostFlags(vm::VM_SEALED);
    const ACCOUNT: Self = HostFlags(vm::VM_ACCOUNT);
    const NORESERVE: Self = HostFlags(vm::VM_NORESERVE);

    fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    fn with_prot(self, read: bool, write: bool, exec: bool) -> Self {
        let mut access = 0;
        if read {
            access |= vm::VM_READ;
        }
        if write {
            access |= vm::VM_WRITE;
        }
        if exec {
            access |= vm::VM_EXEC;
        }
        HostFlags((self.0 & !Self::ACCESS) | access)
    }

    fn access_allowed(self) -> bool {
        self.0 & !(self.0 >> 4) & Self::ACCESS == 0
    }

    fn merge_equal(self, other: Self) -> bool {
        (self.0 ^ other.0) & !vm::VM_SOFTDIRTY == 0
    }

    fn is_data(self) -> bool {
        self.0 & (vm::VM_WRITE | vm::VM_SHARED | vm::VM_STACK) == vm::VM_WRITE
    }

    fn is_exec(self) -> bool {
        self.0 & (vm::VM_WRITE | vm::VM_EXEC | vm::VM_STACK) == vm::VM_EXEC
    }
}
