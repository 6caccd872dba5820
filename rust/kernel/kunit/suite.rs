// SPDX-License-Identifier: GPL-2.0

//! KUnit suites written in Rust, for any crate of the kernel.
//!
//! The doctests of the `kernel` crate are gathered into one generated suite.
//! Crates elsewhere in the tree (for example `mm/*_rs`) declare their own
//! suites with [`kunit_suite!`](crate::kunit_suite): the macro builds the
//! `struct kunit_case` table and the `struct kunit_suite`, and places a
//! pointer to the suite in the `.kunit_test_suites` section, where KUnit
//! finds suites of built-in code at boot and of modules at load time.
//!
//! A test case is a plain function returning [`Result`].  Returning an error
//! fails the case; [`kunit_expect!`](crate::kunit_expect) and
//! [`kunit_expect_eq!`](crate::kunit_expect_eq) record a failure and let the
//! case go on, so one run reports every broken expectation.
//!
//! C header: [`include/kunit/test.h`](srctree/include/kunit/test.h)

use crate::{
    alloc::flags::GFP_KERNEL, bindings, delay::MaySleep, error::Result, str::CStr, sync::Arc,
};
use core::{
    ffi::c_void,
    fmt,
    sync::atomic::{AtomicUsize, Ordering},
};

/// A small deterministic generator (xorshift64*) for tests: a failing
/// sequence reproduces from its seed.  Not for anything but tests.
///
/// # Examples
///
/// ```
/// use kernel::kunit::suite::TestRng;
///
/// let (mut a, mut b) = (TestRng::new(7), TestRng::new(7));
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// assert!(TestRng::new(0).next_u64() != 0);
/// ```
pub struct TestRng(u64);

impl TestRng {
    /// Creates a generator; seed 0 (a fixed point of xorshift) is replaced.
    pub const fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Returns a number in `0..n`; `n` must not be 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Returns a number in `0..n`; `n` must not be 0.
    pub fn below_u64(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Starts `n` concurrent workers for a test on the `system_unbound`
/// workqueue, worker `i` running the closure `make(i)` returns, and returns
/// them as [`Workers`]: [`Workers::started`] says how many could be started
/// (spawning allocates, so some may not), and dropping the value waits
/// until every started worker has returned.
///
/// A worker runs on behalf of the test that started it: a failed
/// [`kunit_expect!`](crate::kunit_expect) in the worker (or a KASAN report
/// KUnit attributes to the current test) fails that test, as it would in the
/// test's own thread.  So no worker may outlive the test: the [`Workers`]
/// guard joins them when it goes out of scope, an early return with `?`
/// included.  A test whose workers wait for something the test thread does
/// must do that before the guard is dropped, or the join waits for ever
/// (which the hung-task detector then reports).  Tests should check that all
/// `n` started.  Joining sleeps: the guard borrows the test's
/// [`MaySleep`](crate::delay::MaySleep) token `ctx` for its life, so no RCU
/// read-side section can be entered with that token while it lives, and it
/// cannot be dropped inside one.  A worker that sleeps makes its own token,
/// as the body of a work item runs in process context.
///
/// # Examples
///
/// ```
/// use core::sync::atomic::{AtomicUsize, Ordering};
/// use kernel::{delay::MaySleep, kunit::suite::spawn_workers, sync::Arc};
///
/// // SAFETY: a KUnit case runs in process context, outside atomic sections.
/// let ctx = unsafe { MaySleep::new() };
/// let done = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
/// let workers = spawn_workers(&ctx, 3, |_| {
///     let done = done.clone();
///     move || {
///         done.fetch_add(1, Ordering::AcqRel);
///     }
/// });
/// assert_eq!(workers.started(), 3);
/// // Dropping the guard waits for the three workers.
/// drop(workers);
/// assert_eq!(done.load(Ordering::Acquire), 3);
/// # Ok::<(), Error>(())
/// ```
///
/// A failing expectation in a worker is counted against the test; here
/// [`records_failure`] observes the failure and withdraws it again, so the
/// example itself passes only if the worker's failure reached the test:
///
/// ```
/// use core::sync::atomic::{AtomicBool, Ordering};
/// use kernel::{
///     delay::MaySleep,
///     kunit::suite::{records_failure, spawn_workers},
///     kunit_expect,
///     sync::Arc,
/// };
///
/// // SAFETY: a KUnit case runs in process context, outside atomic sections.
/// let ctx = unsafe { MaySleep::new() };
/// let done = Arc::new(AtomicBool::new(false), GFP_KERNEL)?;
/// let failed = records_failure(|| {
///     let _workers = spawn_workers(&ctx, 1, |_| {
///         let done = done.clone();
///         move || {
///             kunit_expect!(done.load(Ordering::Relaxed), "worker failure on purpose");
///             done.store(true, Ordering::Release);
///         }
///     });
///     // `_workers` is dropped here: the worker has returned.
/// });
/// assert!(done.load(Ordering::Acquire)); // the worker ran
/// assert!(failed); // and its failed expectation was counted
/// # Ok::<(), Error>(())
/// ```
pub fn spawn_workers<'a, F>(
    ctx: &'a MaySleep,
    n: usize,
    mut make: impl FnMut(usize) -> F,
) -> Workers<'a>
where
    F: FnOnce() + Send + 'static,
{
    let test = TestRef::current();
    let Ok(left) = Arc::new(AtomicUsize::new(0), GFP_KERNEL) else {
        return Workers {
            started: 0,
            left: None,
            ctx,
        };
    };
    let started = (0..n)
        .filter(|&i| {
            let work = make(i);
            let mine = left.clone();
            // Counted before it can run, so that a join never misses it.
            left.fetch_add(1, Ordering::AcqRel);
            let spawned = crate::workqueue::system_unbound()
                .try_spawn(GFP_KERNEL, move || {
                    test.run_as(work);
                    mine.fetch_sub(1, Ordering::AcqRel);
                })
                .is_ok();
            if !spawned {
                left.fetch_sub(1, Ordering::AcqRel);
            }
            spawned
        })
        .count();
    Workers {
        started,
        left: Some(left),
        ctx,
    }
}

/// The workers [`spawn_workers`] started.
///
/// # Invariants
///
/// `left`, if any, counts the started workers that have not returned yet.
#[must_use = "dropping the workers waits for them at once"]
pub struct Workers<'a> {
    started: usize,
    left: Option<Arc<AtomicUsize>>,
    /// The test's token, borrowed until the workers are joined.
    ctx: &'a MaySleep,
}

impl Workers<'_> {
    /// How many workers were started.
    pub fn started(&self) -> usize {
        self.started
    }

    /// Waits until every started worker has returned.
    pub fn join(self) {}
}

impl Drop for Workers<'_> {
    fn drop(&mut self) {
        if let Some(left) = &self.left {
            // Poll, as the workers' runs are long next to a millisecond;
            // the borrowed token proves the test may sleep here.
            while left.load(Ordering::Acquire) != 0 {
                crate::delay::msleep(self.ctx, 1);
            }
        }
    }
}

/// The KUnit test the current task runs (or NULL), carried to a worker.
#[derive(Clone, Copy)]
struct TestRef(*mut bindings::kunit);

// SAFETY: the pointer is only handed back to KUnit, whose failure path may be
// called from any task while the test runs (it takes the test's own locks);
// the `Workers` guard of the test waits for its workers, so the test outlives
// them (see `spawn_workers`).
unsafe impl Send for TestRef {}

impl TestRef {
    fn current() -> Self {
        // SAFETY: FFI call without preconditions.
        Self(unsafe { bindings::kunit_get_current_test() })
    }

    /// Runs `f` as part of this test: KUnit finds the test of a task in
    /// `current->kunit_test`, which is set for the call and then restored.
    fn run_as(self, f: impl FnOnce()) {
        #[cfg(CONFIG_KUNIT)]
        {
            // SAFETY: `get_current` returns the running task, valid for the
            // duration of this function; only this task touches its own
            // `kunit_test` field here.
            let task = unsafe { bindings::get_current() };
            // SAFETY: as above.
            let saved = unsafe { core::ptr::replace(&raw mut (*task).kunit_test, self.0) };
            f();
            // SAFETY: as above.
            unsafe { (*task).kunit_test = saved };
        }
        #[cfg(not(CONFIG_KUNIT))]
        {
            let _ = self;
            f();
        }
    }
}

/// Runs `f` and returns whether it failed the current KUnit test (in this
/// task, or in workers of [`spawn_workers`] it waited for); such a failure is
/// then withdrawn, and an earlier failure of the test is kept.
///
/// Meant for tests of the test helpers themselves, which must show that a
/// failure is counted without failing the suite.  Outside a test it runs `f`
/// and returns `false`.
pub fn records_failure(f: impl FnOnce()) -> bool {
    // SAFETY: FFI call without preconditions.
    let test = unsafe { bindings::kunit_get_current_test() };
    if test.is_null() {
        f();
        return false;
    }
    // SAFETY: `test` is the test this task runs, valid until it returns;
    // workers write `status` with `WRITE_ONCE`, hence volatile accesses.
    let status = unsafe { &raw mut (*test).status };
    // SAFETY: as above.
    let before = unsafe { status.read_volatile() };
    // SAFETY: as above.
    unsafe { status.write_volatile(bindings::kunit_status_KUNIT_SUCCESS) };
    f();
    // SAFETY: as above.
    let after = unsafe { status.read_volatile() };
    // SAFETY: as above.
    unsafe { status.write_volatile(before) };
    after == bindings::kunit_status_KUNIT_FAILURE
}

/// Signature of the function behind one test case.
pub type CaseFn = fn() -> Result;

/// Length of `struct kunit_suite::name`, including the terminating NUL.
const SUITE_NAME_LEN: usize = 256;

/// Builds one `struct kunit_case` that runs `run`.
///
/// Used by [`kunit_suite!`](crate::kunit_suite); not meant to be called directly.
#[doc(hidden)]
pub const fn case(
    name: &'static CStr,
    run: unsafe extern "C" fn(*mut bindings::kunit),
    speed: bindings::kunit_speed,
) -> bindings::kunit_case {
    // SAFETY: `kunit_case` is a C struct of pointers, integers and enums for
    // which all-zero is the documented "unset" value KUnit expects.
    let mut c: bindings::kunit_case = unsafe { core::mem::zeroed() };
    c.run_case = Some(run);
    c.name = name.as_char_ptr();
    c.attr.speed = speed;
    c
}

/// Speed attribute of a case marked `#[slow]` in [`kunit_suite!`](crate::kunit_suite).
#[doc(hidden)]
pub const SPEED_SLOW: bindings::kunit_speed = bindings::kunit_speed_KUNIT_SPEED_SLOW;

/// Speed attribute of an unmarked case (KUnit treats it as normal).
#[doc(hidden)]
pub const SPEED_UNSET: bindings::kunit_speed = bindings::kunit_speed_KUNIT_SPEED_UNSET;

/// The all-zero `struct kunit_case` that terminates a case table.
#[doc(hidden)]
pub const fn case_terminator() -> bindings::kunit_case {
    // SAFETY: KUnit stops at the first case whose `run_case` is NULL; all-zero
    // is a valid value of this C struct.
    unsafe { core::mem::zeroed() }
}

/// Builds a `struct kunit_suite` named `name` over the case table `cases`.
///
/// The name must be shorter than 256 bytes and must not contain NUL bytes;
/// both are checked at compile time when called from a `static` initializer.
#[doc(hidden)]
pub const fn suite(name: &str, cases: *mut bindings::kunit_case) -> bindings::kunit_suite {
    let bytes = name.as_bytes();
    assert!(
        !bytes.is_empty() && bytes.len() < SUITE_NAME_LEN,
        "KUnit suite names are 1 to 255 bytes long"
    );
    // SAFETY: all-zero is a valid `kunit_suite` (NULL callbacks, empty name,
    // zeroed private state), which is what KUnit expects of a fresh suite.
    let mut s: bindings::kunit_suite = unsafe { core::mem::zeroed() };
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i] != 0, "KUnit suite names cannot contain NUL");
        s.name[i] = bytes[i] as _;
        i += 1;
    }
    s.test_cases = cases;
    s
}

/// Runs one case and reports an `Err` it returns as a KUnit failure.
#[doc(hidden)]
pub fn run_case(f: CaseFn, name: &str) {
    if let Err(e) = f() {
        fail(
            crate::c_str!("<rust>"),
            0,
            format_args!("case {} returned {:?}", name, e),
        );
    }
}

/// Records a failure of the KUnit test the current task runs (workers of
/// [`spawn_workers`] run as part of their test).
///
/// Outside a test (for example in a thread a test started some other way)
/// the failure can only be logged, which this function does with `pr_err!`.
pub fn fail(file: &'static CStr, line: u32, args: fmt::Arguments<'_>) {
    // SAFETY: FFI call without preconditions.
    let test = unsafe { bindings::kunit_get_current_test() };
    if test.is_null() {
        crate::pr_err!(
            "KUnit failure outside a test at {}:{}: {}\n",
            file,
            line,
            args
        );
        return;
    }
    // SAFETY: KUnit fills its hook table when it initialises, before any
    // test runs, and never changes it afterwards; the field is read by value.
    let hook = unsafe { (*core::ptr::addr_of!(bindings::kunit_hooks)).fail_current_test };
    if let Some(hook) = hook {
        // SAFETY: `file` is NUL-terminated and lives forever; `%pA` takes a
        // pointer to a `fmt::Arguments`, which `args` is for the whole call.
        unsafe {
            hook(
                file.as_char_ptr(),
                line as _,
                c"%pA".as_ptr().cast(),
                &args as *const _ as *const c_void,
            )
        };
    }
}

/// Declares a KUnit suite whose cases are functions of type `fn() -> Result`.
///
/// # Examples
///
/// ```ignore
/// fn adds_up() -> Result {
///     kernel::kunit_expect_eq!(2 + 2, 4);
///     Ok(())
/// }
///
/// kernel::kunit_suite! {
///     name: "example_rust_suite",
///     cases: [adds_up],
/// }
/// ```
///
/// A case that takes more than a second or so is marked `#[slow]` in the
/// list (`cases: [quick_one, #[slow] stress]`), so that KUnit's
/// `kunit.filter=speed>slow` can skip it.
///
/// The example is not run as a doctest because a doctest cannot register a
/// suite of its own; every crate under `mm/*_rs` uses the macro for real.
#[macro_export]
macro_rules! kunit_suite {
    (name: $name:literal, cases: [$($(#[$speed:ident])? $case:ident),+ $(,)?] $(,)?) => {
        #[doc(hidden)]
        mod __kunit_suite {
            $(
                // The wrapper has the C signature KUnit calls and forwards to
                // the Rust case of the same name in the parent module.
                pub(super) extern "C" fn $case(_test: *mut $crate::bindings::kunit) {
                    $crate::kunit::suite::run_case(super::$case, ::core::stringify!($case));
                }
            )+

            static mut CASES: [$crate::bindings::kunit_case;
                               [$(::core::stringify!($case)),+].len() + 1] = [
                $($crate::kunit::suite::case(
                    $crate::c_str!(::core::stringify!($case)),
                    $case,
                    $crate::__kunit_case_speed!($($speed)?),
                ),)+
                $crate::kunit::suite::case_terminator(),
            ];

            // Taking the address of a `static mut` is safe; KUnit is the
            // only user of the table and serialises its accesses.
            static mut SUITE: $crate::bindings::kunit_suite =
                $crate::kunit::suite::suite($name, (&raw mut CASES).cast());

            // KUnit walks this section for suites of built-in code and of
            // modules; the entry must survive dead-code elimination.
            #[used]
            #[link_section = ".kunit_test_suites"]
            static mut ENTRY: *mut $crate::bindings::kunit_suite = &raw mut SUITE;
        }
    };
}

/// Maps the optional `#[slow]` marker of a case to its KUnit speed.
#[doc(hidden)]
#[macro_export]
macro_rules! __kunit_case_speed {
    () => {
        $crate::kunit::suite::SPEED_UNSET
    };
    (slow) => {
        $crate::kunit::suite::SPEED_SLOW
    };
}

/// Checks a condition inside a KUnit case; on failure records it and goes on.
///
/// An optional format string and arguments describe the failure.
#[macro_export]
macro_rules! kunit_expect {
    ($cond:expr $(,)?) => {
        $crate::kunit_expect!($cond, "{}", ::core::stringify!($cond))
    };
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            $crate::kunit::suite::fail(
                $crate::c_str!(::core::file!()),
                ::core::line!(),
                ::core::format_args!($($arg)+),
            );
        }
    };
}

/// Checks that two values are equal inside a KUnit case; on failure records
/// both values and goes on.
#[macro_export]
macro_rules! kunit_expect_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (l, r) => {
                if !(*l == *r) {
                    $crate::kunit::suite::fail(
                        $crate::c_str!(::core::file!()),
                        ::core::line!(),
                        ::core::format_args!(
                            "{} == {} failed: {:?} != {:?}",
                            ::core::stringify!($left),
                            ::core::stringify!($right),
                            l,
                            r
                        ),
                    );
                }
            }
        }
    };
}
