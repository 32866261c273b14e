// The folder and the analysis allocate and free many small buffers per dependence on
// irregular programs; glibc's allocator spent a third of the folding thread's time on them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(polyprof::cli_main());
}
