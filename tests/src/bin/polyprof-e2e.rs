//! The polyprof command line, built inside the test crate so that integration tests can run it
//! through `CARGO_BIN_EXE_polyprof-e2e`.

fn main() {
    std::process::exit(polyprof::cli_main())
}
