// glibc malloc showed up as a quarter of the app's CPU under pixel load
// (many small, short-lived allocations freed on other threads); mimalloc
// handles that pattern with far less work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tickertape::cli::main()
}
