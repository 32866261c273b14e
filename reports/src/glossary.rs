//! Every term and metric the reports print, defined once: report.html's glossary, and the
//! README's reference to it.

/// A term: its anchor in report.html, the words the reports print, and what it means.
pub struct Term {
    pub id: &'static str,
    pub name: &'static str,
    pub meaning: &'static str,
}

/// The glossary, in reading order.
pub const GLOSSARY: &[Term] = &[
    Term {
        id: "region",
        name: "Region",
        meaning: "A loop nest of the dynamic schedule tree holding at least --region-threshold (default 5%) of the traced instructions. Regions are analysed hottest first, at most 8.",
    },
    Term {
        id: "ops",
        name: "Traced instructions (ops %)",
        meaning: "Share of all dynamic instructions polyprof traced that ran in the region. Natively-run library calls are not counted here.",
    },
    Term {
        id: "run",
        name: "Run's time (run %)",
        meaning: "Share of the run's time: the region's traced instructions plus what the library calls made inside it cost natively (instructions counted by the CPU, or CPU time converted to instruction equivalents), over the same for the whole run.",
    },
    Term {
        id: "interprocedural",
        name: "Interprocedural",
        meaning: "The region spans several functions, or calls library code that runs natively (opaque to the analysis).",
    },
    Term {
        id: "affine",
        name: "Exactly affine (affine %)",
        meaning: "Share of the region's statement executions whose iteration domains and addresses folded exactly into polyhedra with affine functions. The rest is over-approximated, and advice about it is less certain.",
    },
    Term {
        id: "loop",
        name: "Loop (L5, matmul.c:17)",
        meaning: "A loop of the region, named by the source line of its header (from the DWARF line tables) and an id stable within the report.",
    },
    Term {
        id: "parallel",
        name: "Parallel",
        meaning: "No dependence of any kind (flow, anti or output, through registers, memory or library state) is carried by the loop as written, once the storage changes named in the advice's requires are made: its iterations can run in any order, at once.",
    },
    Term {
        id: "permutable",
        name: "Permutable",
        meaning: "The loop and the loops around it form a permutable band: no dependence goes backwards along any of them, so they can be interchanged and tiled.",
    },
    Term {
        id: "carries",
        name: "Carries",
        meaning: "The kinds of dependence (flow: a value written in one iteration and read in a later one; anti: read, then overwritten later; output: written twice) the loop surely carries as written, before any storage change. Answers marked 'from distances alone' were computed without isl, which stopped first: cautious, what the distances do not decide counts as carried.",
    },
    Term {
        id: "stride01",
        name: "Stride 0/1",
        meaning: "Share of the memory accesses inside the loop (weighted by executions) whose address, from one iteration of this loop to the next, stays the same (stride 0) or moves by one element (stride 1): accesses that use every byte of the cache lines they bring.",
    },
    Term {
        id: "memops",
        name: "Memory ops",
        meaning: "Share of the region's statement executions that read or write memory.",
    },
    Term {
        id: "fpops",
        name: "FP ops",
        meaning: "Share of the region's statement executions that are floating-point arithmetic.",
    },
    Term {
        id: "parops",
        name: "Parallel ops",
        meaning: "Share of the region's operations inside a loop that can run in parallel, in the loop order advised.",
    },
    Term {
        id: "simdops",
        name: "SIMD ops",
        meaning: "Share of the region's operations in an innermost loop whose iterations are independent: what vector instructions could run.",
    },
    Term {
        id: "reuse",
        name: "Reuse",
        meaning: "Share of the innermost loop's accesses with stride 0 or 1 along it, as the program is written.",
    },
    Term {
        id: "preuse",
        name: "Preuse",
        meaning: "Potential reuse: the same share with the loop that makes it highest moved innermost. Preuse above reuse means an interchange would improve locality.",
    },
    Term {
        id: "tiledepth",
        name: "Tile depth",
        meaning: "Loops in the deepest permutable band of isl's schedule along the hottest statement's path (two or more can be tiled), with the share of operations inside it.",
    },
    Term {
        id: "components",
        name: "Components a -> b",
        meaning: "Outermost loop nests holding more than 5% of the region's operations, before and after isl's schedule: fewer after means loops can be fused, more means distributed.",
    },
    Term {
        id: "skew",
        name: "Skew",
        meaning: "isl's schedule iterates along a combination of loops (t + i), which makes a nest whose dependences point in several directions tilable and exposes wavefront parallelism.",
    },
    Term {
        id: "loopdepth",
        name: "Loop depth",
        meaning: "The deepest loop nesting of the region in the binary.",
    },
    Term {
        id: "statement",
        name: "Statement (S1, S1-S4)",
        meaning: "A machine instruction of the region (S1, as listed in report.json's statements), or a block of consecutive instructions that run in the same loops over the same iterations (S1-S4: statements S1 to S4), moved as one. Instructions that only count loops or compute addresses are not statements.",
    },
    Term {
        id: "code",
        name: "Code before and after",
        meaning: "C-like code generated by isl's AST generator from the region's schedule as written and as advised. Loop counters c1, c3, ... are named after schedule dimensions and start at 0; comments name the loop or statement and its source line; `tiles of 32 of` marks the loop over tiles, the loop below it walks one tile.",
    },
    Term {
        id: "estimate",
        name: "Estimated gain",
        meaning: "The region's time before over its time after the advice (2.0x: twice as fast), from the model named; then the whole run's, by Amdahl's law over the region's share of the run's time. An estimate, not a measurement: `gain_bench` compares them (README, Benchmarks).",
    },
    Term {
        id: "cachelines",
        name: "Cache-lines model",
        meaning: "From the strides of the region's own accesses: cache lines brought from beyond the cache per iteration of the innermost loop, before and after (a stride of s bytes brings min(1, s/64) new lines; data the next loop out uses again whole stays cached when one run of the innermost loop fits in 32 KiB; reuse carried further out is taken as lost, as on inputs whose data outgrows the cache; a tile keeps it when its data fits). Each iteration costs its instructions at 3 per cycle, or the 4-cycle latency of a dependence the loop carries, whichever is longer, plus 8 cycles per line.",
    },
    Term {
        id: "amdahl",
        name: "Amdahl's law",
        meaning: "For parallel loops: the share of the region's instructions inside the loop is divided by the threads (this machine's cores), the rest is not, and each run of the loop pays about 4,000 instructions to start and join the threads.",
    },
    Term {
        id: "simd",
        name: "SIMD model",
        meaning: "For vectorization: Amdahl's law over the innermost loop's share, with as many lanes as a 16-byte vector register holds of its widest element.",
    },
    Term {
        id: "rank",
        name: "Rank and alternatives",
        meaning: "Advice is listed best first by estimated gain. Advice marked `or` is an alternative to the one above it (transposing an array, or padding its rows, instead of the interchange that fixes the same accesses): do one of them. A storage change is listed right after the transformation it makes legal.",
    },
    Term {
        id: "mapping",
        name: "Storage and layout maps",
        meaning: "A storage or layout suggestion gives the new place of each element of the array as a map in isl's notation and as a C index. `{ A[i, j] -> [(i - j) mod 31] }` (a storage hyperplane, SMO): the element A[i][j] goes to cell (i - j) mod 31 of a 31-cell buffer, legal because no two values live at the same time (from a write to its last read, reads after the loop nest included) land in one cell. `{ B[i, j] -> [j, i] }`: transposition. `{ A[i, j] -> [1032i + j] }`: rows padded to 1032 elements. share_storage: arrays whose values are never live at the same time use one buffer.",
    },
    Term {
        id: "skipped",
        name: "Not worth it here",
        meaning: "Legal advice that would not pay on this run: a tile larger than the loop's iterations, threads started for too little work, a loop the compiler already vectorized, or a model's gain under 1.1x. Listed with the reason rather than dropped.",
    },
    Term {
        id: "requires",
        name: "Requires",
        meaning: "Storage changes without which the advice is not legal: privatize (a copy per thread), firstprivate (copies start from the value before the loop), lastprivate (the last iteration's copy is kept), copy_in (reads see a copy made before the loop), expand (a scalar becomes an array along a loop), map_to_array (a scalar lives in an array element that is dead meanwhile).",
    },
    Term {
        id: "recommended",
        name: "Recommended",
        meaning: "The region's advice composed into one transformation: the best-ranked loop order, tiling, parallel loop of each nest and vectorized loop, checked together as one schedule against the observed dependences (a part that check refutes is left out, and said). Its estimate multiplies the parts' own, counting only the better of an order and a tiling (both save cache misses). The code after the advice shows it.",
    },
    Term {
        id: "whynot",
        name: "Why not",
        meaning: "What blocked further advice: the dependence a transformation would break, with its kind, storage and relation; a non-affine access; a library call.",
    },
    Term {
        id: "native",
        name: "[native] frame",
        meaning: "In the flame graph, what the library calls made from a context cost when run natively, weighted by that cost (its unit is stated in the subtitle).",
    },
];
