//! The `mesopod` binary for the end-to-end tests: the same entry
//! ([`framework::cmd::main`]) and allocator, built by cargo before them.

// As in framework's `mesopod` (see there why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    framework::cmd::main()
}
