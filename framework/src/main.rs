//! The `mesopod` binary: [`framework::cmd::main`] with mesopod's allocator.

// glibc's malloc spent a fifth of the scale benchmark's CPU in its own
// bookkeeping and kept freed memory in per-thread arenas; mimalloc does both
// far better for a process of many small, short-lived allocations. It is
// built without transparent huge pages (feature `no_thp`): it returns freed
// memory to the system a second after it is freed, and taking a freed page
// back made the kernel zero a whole 2 MiB huge page each time, an eighth of
// the scale benchmark's CPU.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    framework::cmd::main()
}
