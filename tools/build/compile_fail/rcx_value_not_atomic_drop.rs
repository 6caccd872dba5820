// expect: E0277
//! RCX frees removed items, and so drops their values, through
//! `drop_after_gp`: the value type of a list or table must be
//! `AtomicDrop`, which a type with a `Drop` of its own is not unless it
//! says so (unsafely).
use rcx::{hash::RcxHash, list::RcxList};

#[derive(Default)]
pub struct Sleepy;

impl Drop for Sleepy {
    fn drop(&mut self) {}
}

pub fn misuse(_list: &RcxList<Sleepy>, _table: &RcxHash<Sleepy>) {}
