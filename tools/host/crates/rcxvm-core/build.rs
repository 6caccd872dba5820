// SPDX-License-Identifier: GPL-2.0

//! Writes `$OUT_DIR/kernel_config.rs` (the kernel's options) and
//! `$OUT_DIR/vm_flags.rs`, the VMA flag values of the kernel this crate
//! mirrors, from the configured kernel tree when there is one (see
//! `tools/host/build-support/kernel_config.rs`); x86-64's values otherwise.

#[path = "../../build-support/kernel_config.rs"]
mod kernel_config;

fn main() {
    kernel_config::emit(&["RCX", "RCX_KUNIT_TEST", "RCXVM"]);
    kernel_config::emit_u64_consts(
        "vm_flags.rs",
        &[
            ("VM_READ", 0x1),
            ("VM_WRITE", 0x2),
            ("VM_EXEC", 0x4),
            ("VM_SHARED", 0x8),
            ("VM_MAYREAD", 0x10),
            ("VM_MAYWRITE", 0x20),
            ("VM_MAYEXEC", 0x40),
            ("VM_MAYSHARE", 0x80),
            ("VM_GROWSDOWN", 0x100),
            ("VM_GROWSUP", 0),
            ("VM_STACK", 0x100),
            ("VM_UFFD_MISSING", 0x200),
            ("VM_UFFD_WP", 0x1000),
            ("VM_LOCKED_MASK", 0x82000),
            ("VM_SPECIAL", 0x10044400),
            ("VM_ACCOUNT", 0x100000),
            ("VM_NORESERVE", 0x200000),
            ("VM_HUGETLB", 0x400000),
            ("VM_SOFTDIRTY", 0x8000000),
            ("VM_MERGEABLE", 0x8000_0000),
            ("RSMM_VM_UFFD_MINOR", 1 << 38),
            ("RSMM_VM_DROPPABLE", 1 << 40),
            ("RSMM_VM_SEALED_BIT", 63),
            ("RSMM_VM_SHADOW_STACK", 0),
            ("RSMM_VM_FLAGS_CLEAR", 0xf << 32),
        ],
    );
}
