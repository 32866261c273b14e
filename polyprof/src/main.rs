fn main() {
    std::process::exit(polyprof::cli_main());
}
