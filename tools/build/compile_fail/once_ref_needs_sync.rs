// expect: E0277
//! A `OnceRef` is read from any task without a lock, so a type that is not
//! `Sync` cannot be published through one: such a slot cannot be a static.
use core::cell::Cell;
use kernel::sync::once_ref::OnceRef;

static SLOT: OnceRef<Cell<u32>> = OnceRef::new();
