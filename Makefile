# The set-up commands (see README.md): `make demo`, `make install`, `make test`.
.PHONY: demo build install uninstall test bench bench-advice deps lint bless

CARGO ?= cargo
# Where `make install` puts polyprof: PREFIX/bin, PREFIX/share/man/man1 and
# PREFIX/share/bash-completion/completions. Default: cargo's own root, ~/.cargo (rustup puts
# ~/.cargo/bin in PATH; man, and bash-completion from 2.12 on, look beside the PATH entries).
PREFIX ?= $(or $(CARGO_INSTALL_ROOT),$(CARGO_HOME),$(HOME)/.cargo)

deps:
	@scripts/install-deps.sh

# Everything builds in the release profile, tests included, so that isl (compiled from source
# by the isl-rs crate's build script, once per profile) is built once.
build: deps
	@ls target/release/build 2>/dev/null | grep -q '^isl-rs-' || \
	  echo "polyprof: the first build compiles isl from source: a few minutes with no output"
	$(CARGO) build --release -p polyprof

# Builds polyprof and profiles the bundled example program into polyprof-out/matmul/.
demo: build
	mkdir -p target/examples
	cc -O2 -g -o target/examples/matmul examples/matmul.c
	./target/release/polyprof -o polyprof-out/matmul target/examples/matmul

# Installs polyprof (from the release build), its manual pages and its bash completion.
install: build
	$(CARGO) install --locked --path polyprof --root "$(PREFIX)"
	"$(PREFIX)/bin/polyprof" man "$(PREFIX)/share/man/man1"
	mkdir -p "$(PREFIX)/share/bash-completion/completions"
	"$(PREFIX)/bin/polyprof" completions bash > "$(PREFIX)/share/bash-completion/completions/polyprof"

uninstall:
	$(CARGO) uninstall --root "$(PREFIX)" polyprof
	rm -f "$(PREFIX)"/share/man/man1/polyprof.1 "$(PREFIX)"/share/man/man1/polyprof-*.1
	rm -f "$(PREFIX)/share/bash-completion/completions/polyprof"

# Runs the whole test suite (unit and end-to-end tests), in the release profile.
test: deps
	$(CARGO) test --release --workspace

# Rewrites the report snapshots after an intended change (review with git diff).
bless: deps
	INSTA_UPDATE=always $(CARGO) test --release -p tests --test snapshots

# Prints throughput figures (see README.md, "Benchmarks").
bench: build
	$(CARGO) run --release -p bench --bin scale_bench

# Applies polyprof's recommended transformation to each PolyBench/C kernel, checks its output
# and times it against gcc -O2, clang -O3, Polly and Polly -polly-parallel (see
# scripts/polybench-audit/README.md). Installs clang-14 (Polly built in) and fetches
# PolyBench/C 4.2.1 into POLYBENCH when missing. BENCH_ADVICE_ARGS: e.g. `--only gemm,2mm`.
POLYBENCH ?= /tmp/pb
PB_URL ?= https://downloads.sourceforge.net/project/polybench/polybench-c-4.2.1-beta.tar.gz
bench-advice: build
	@scripts/install-deps.sh --bench
	@test -d "$(POLYBENCH)/utilities" || { mkdir -p "$(POLYBENCH)" && \
	  curl -fsSL "$(PB_URL)" | tar xz -C "$(POLYBENCH)" --strip-components=1; }
	python3 scripts/polybench-audit/bench_advice.py --polybench "$(POLYBENCH)" \
	  --polyprof target/release/polyprof $(BENCH_ADVICE_ARGS)

# Formatting and lints, in the release profile too (`cargo clippy` runs isl's build script).
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
