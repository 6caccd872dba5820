// expect: E0277
//! `drop_after_gp` drops its object from an RCU callback, in softirq
//! context: a `Send` type whose `Drop` sleeps (here it takes a mutex) is
//! refused, as it is not `AtomicDrop`.
use kernel::{
    prelude::*,
    sync::{
        rcu::{self, RcuHead},
        Arc, Mutex,
    },
};

struct Sleepy {
    rcu: RcuHead,
    shared: Arc<Mutex<u64>>,
}
kernel::impl_has_rcu_head!(Sleepy, rcu);

impl Drop for Sleepy {
    fn drop(&mut self) {
        *self.shared.lock() += 1;
    }
}

pub fn misuse(obj: KBox<Sleepy>) {
    rcu::drop_after_gp(obj);
}
