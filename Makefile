# The two set-up commands (see README.md): `make demo` and `make test`.
.PHONY: demo test bench deps lint

CARGO ?= cargo

deps:
	@scripts/install-deps.sh

# Builds polyprof and profiles the bundled example program.
demo: deps
	$(CARGO) build --release -p polyprof
	mkdir -p target/examples
	cc -O2 -g -o target/examples/matmul examples/matmul.c
	./target/release/polyprof -o polyprof-out/matmul target/examples/matmul

# Runs the whole test suite.
test: deps
	$(CARGO) test --workspace

# Prints throughput figures (see README.md, "Benchmark").
bench: deps
	$(CARGO) build --release -p polyprof
	$(CARGO) run --release -p bench --bin scale_bench

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
