// The folder and the analysis allocate and free many small buffers per dependence on
// irregular programs: glibc's allocator took a third of the folding thread's time on them, and
// kept the second pass's memory after it was freed, under the analysis's. (mimalloc's eager
// commit costs short runs a fixed 20 MB; its options for less, set from here, cost time.)
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(polyprof::cli_main());
}
