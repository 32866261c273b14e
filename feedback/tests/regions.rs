//! The feedback on hand-written polyhedral regions of classic kernels.

use feedback::{
    analyze_region, Access, Boundary, DepKind, Dependence, EqualPairs, Loop, Options, Polyhedra,
    Region, SharedVariable, Statement, Storage, SuggestionKind,
};

/// Polyhedra written in isl's notation.
fn poly(text: &str) -> Polyhedra {
    Polyhedra::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn acc(strides: &[i64], size: u32, write: bool) -> Access {
    Access {
        strides: strides.iter().map(|&s| Some(s)).collect(),
        size,
        write,
        base: Some(0),
        array: Some("a".into()),
    }
}

fn lp(id: &str, label: &str) -> Loop {
    Loop {
        id: id.into(),
        label: label.into(),
    }
}

fn stmt(
    name: &str,
    loops: &[usize],
    positions: &[u32],
    domain: &str,
    ops: u64,
    accesses: Vec<Access>,
) -> Statement {
    Statement {
        name: name.into(),
        label: format!("k.c:{name}"),
        loops: loops.to_vec(),
        positions: positions.to_vec(),
        domain: poly(domain),
        ops,
        accesses,
        fp: true,
        exact: true,
        update: None,
    }
}

fn dep(src: &str, sink: &str, rel: &str) -> Dependence {
    Dependence {
        source: src.into(),
        sink: sink.into(),
        kind: DepKind::Flow,
        storage: Storage::Array { name: "a".into() },
        relation: poly(rel).into(),
        exact: true,
        equal_pairs: EqualPairs::Unknown,
        reload: None,
        mirror: None,
        invariant_in: Vec::new(),
    }
}

fn dep_of(kind: DepKind, storage: Storage, src: &str, sink: &str, rel: &str) -> Dependence {
    Dependence {
        kind,
        storage,
        ..dep(src, sink, rel)
    }
}

fn array(name: &str) -> Storage {
    Storage::Array { name: name.into() }
}

/// One loop of 16 iterations around one statement, with the given dependences.
fn one_loop(deps: Vec<Dependence>) -> Region {
    Region {
        loops: vec![lp("L0", "k.c:3")],
        statements: vec![stmt(
            "S0",
            &[0],
            &[0, 0],
            "{ S0[i] : 0 <= i <= 15 }",
            16,
            vec![acc(&[8], 8, false), acc(&[8], 8, true)],
        )],
        dependences: deps,
        trips: vec![Some(16)],
        ..Region::default()
    }
}

fn parallel(f: &feedback::Feedback) -> Option<&feedback::Suggestion> {
    f.suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Parallelize)
}

fn changes(s: &feedback::Suggestion) -> Vec<&'static str> {
    s.requires.iter().map(|r| r.change.as_str()).collect()
}

#[test]
fn an_in_place_shift_reads_a_copy() {
    // a[i] = 0.5 * a[i + 1] + 1: iteration i reads what iteration i + 1 overwrites.
    let mut r = one_loop(vec![dep_of(
        DepKind::Anti,
        array("a"),
        "S0",
        "S0",
        "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
    )]);
    r.live_out = vec![Boundary {
        stmt: "S0".into(),
        storage: array("a"),
        relation: poly("{ Outside[] -> S0[i] : 0 <= i <= 15 }"),
        outside: "k.c:9".into(),
    }];
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert!(!f.loops[0].parallel || parallel(&f).is_some());
    let p = parallel(&f).expect("parallel after a copy");
    assert_eq!(changes(p), ["copy_in"], "{p:?}");
    assert!(p.text.contains("from a copy"), "{}", p.text);
    let v = f
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Vectorize);
    assert!(v.is_none_or(|v| !v.requires.is_empty()), "{v:?}");
}

#[test]
fn an_array_rewritten_by_every_iteration_and_read_after_is_serial() {
    let mut r = one_loop(vec![dep_of(
        DepKind::Output,
        array("t"),
        "S0",
        "S0",
        "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
    )]);
    r.live_out = vec![Boundary {
        stmt: "S0".into(),
        storage: array("t"),
        relation: poly("{ Outside[] -> S0[15] }"),
        outside: "k.c:9".into(),
    }];
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert!(parallel(&f).is_none(), "{:?}", f.suggestions);
    assert!(!f.loops[0].parallel);
    let why = f.why_not.expect("why not");
    assert!(why.contains("read after the loop"), "{why}");
    // Not read after the loop: a private copy per thread is legal.
    r.live_out.clear();
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert_eq!(changes(parallel(&f).expect("privatized")), ["privatize"]);
}

#[test]
fn a_scalar_read_after_the_loop_needs_lastprivate_only_when_written_last() {
    let last = Storage::Scalar {
        addr: 0x4010,
        name: "`last`".into(),
    };
    let mut r = one_loop(vec![dep_of(
        DepKind::Output,
        last.clone(),
        "S0",
        "S0",
        "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
    )]);
    r.live_out = vec![Boundary {
        stmt: "S0".into(),
        storage: last.clone(),
        relation: poly("{ Outside[] -> S0[15] }"),
        outside: "k.c:9".into(),
    }];
    let f = analyze_region(&r, &Options::default()).unwrap();
    let p = parallel(&f).expect("parallel with lastprivate");
    assert_eq!(changes(p), ["privatize", "lastprivate"], "{p:?}");
    // The value read after the loop comes from iteration 7, not the last one.
    r.live_out[0].relation = poly("{ Outside[] -> S0[7] }");
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert!(parallel(&f).is_none(), "{:?}", f.suggestions);
}

#[test]
fn a_register_variable_declared_before_the_loop_is_privatized() {
    let xmm0 = Storage::Register {
        reg: "xmm0".into(),
        var: None,
    };
    let mut r = one_loop(vec![dep_of(
        DepKind::Output,
        xmm0,
        "S0",
        "S0",
        "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
    )]);
    let f = analyze_region(&r, &Options::default()).unwrap();
    let p = parallel(&f).expect("parallel");
    assert!(
        changes(p).is_empty(),
        "a register is each thread's own: {p:?}"
    );
    r.shared_variables = vec![SharedVariable {
        name: "t".into(),
        registers: vec!["xmm0".into()],
        loops: vec!["L0".into()],
        lines: vec!["k.c:4".into()],
        ..SharedVariable::default()
    }];
    let f = analyze_region(&r, &Options::default()).unwrap();
    let p = parallel(&f).expect("parallel with t private");
    assert_eq!(changes(p), ["privatize"], "{p:?}");
    assert!(p.requires[0].storage.contains("`t`"), "{p:?}");
}

#[test]
fn a_scalar_declared_in_the_loop_body_needs_no_privatization() {
    let u = Storage::Scalar {
        addr: 0x7ff0_0010,
        name: "`u` (stack of main)".into(),
    };
    let mut r = one_loop(vec![dep_of(
        DepKind::Output,
        u,
        "S0",
        "S0",
        "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
    )]);
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert_eq!(changes(parallel(&f).expect("parallel")), ["privatize"]);
    r.declared_in
        .insert("`u` (stack of main)".into(), vec!["L0".into()]);
    let f = analyze_region(&r, &Options::default()).unwrap();
    let p = parallel(&f).expect("parallel");
    assert!(
        changes(p).is_empty(),
        "`u` is one per iteration already: {p:?}"
    );
}

#[test]
fn a_loop_calling_rand_is_serial() {
    let rng = Storage::Effect {
        name: "the random number generator's state".into(),
    };
    let r = one_loop(vec![
        dep_of(
            DepKind::Flow,
            rng.clone(),
            "S0",
            "S0",
            "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
        ),
        dep_of(
            DepKind::Output,
            rng,
            "S0",
            "S0",
            "{ S0[i] -> S0[i - 1] : 1 <= i <= 15 }",
        ),
    ]);
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert!(parallel(&f).is_none());
    assert!(!f
        .suggestions
        .iter()
        .any(|s| s.kind == SuggestionKind::Vectorize));
    let why = f.why_not.expect("why not");
    assert!(why.contains("random number generator"), "{why}");
}

fn kinds(f: &feedback::Feedback) -> Vec<&str> {
    f.suggestions.iter().map(|s| s.kind.as_str()).collect()
}

fn matmul() -> Region {
    let n = 8;
    Region {
        loops: vec![lp("L0", "k.c:10"), lp("L1", "k.c:11"), lp("L2", "k.c:12")],
        statements: vec![stmt(
            "S0",
            &[0, 1, 2],
            &[0, 0, 0, 0],
            "{ S0[i0, i1, i2] : 0 <= i0 <= 7 and 0 <= i1 <= 7 and 0 <= i2 <= 7 }",
            512,
            vec![
                acc(&[8 * n, 0, 8], 8, false),     // A[i][k]
                acc(&[0, 8, 8 * n], 8, false),     // B[k][j]
                acc(&[8 * n, 8, 0], 8, false),     // C[i][j]
                acc(&[8 * n, 8, 0], 8, true),      // C[i][j]
            ],
        )],
        dependences: vec![dep(
            "S0",
            "S0",
            "{ S0[i0, i1, i2] -> S0[i0, i1, i2 - 1] : 0 <= i0 <= 7 and 0 <= i1 <= 7 and 1 <= i2 <= 7 }",
        )],
        ..Region::default()
    }
}

#[test]
fn matmul_ijk() {
    let f = analyze_region(&matmul(), &Options::default()).unwrap();
    eprintln!("{f:#?}\n{}\n{}", f.ast_before, f.ast_after);
    let par: Vec<bool> = f.loops.iter().map(|l| l.parallel).collect();
    assert_eq!(par, [true, true, false]);
    assert!(f.loops.iter().all(|l| l.permutable));
    let ic = f
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Interchange)
        .expect("interchange");
    assert_eq!(ic.loops, ["L0", "L2", "L1"], "k outside j");
    assert_eq!(f.metrics.tile_depth, 3);
    let k = kinds(&f);
    assert!(
        k.contains(&"tile") && k.contains(&"parallelize") && k.contains(&"vectorize"),
        "{k:?}"
    );
    assert!(f.metrics.preuse_percent > f.metrics.reuse_percent);
    assert!(!f.metrics.skew);
}

#[test]
fn column_wise_traversal_is_interchanged() {
    let r = Region {
        loops: vec![lp("L0", "c.c:5"), lp("L1", "c.c:6")],
        statements: vec![stmt(
            "S0",
            &[0, 1],
            &[0, 0, 0],
            "{ S0[j, i] : 0 <= j <= 15 and 0 <= i <= 15 }",
            256,
            vec![acc(&[4, 64], 4, false), acc(&[4, 64], 4, true)],
        )],
        ..Region::default()
    };
    let f = analyze_region(&r, &Options::default()).unwrap();
    let ic = f
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Interchange)
        .expect("interchange");
    assert_eq!(ic.loops, ["L1", "L0"]);
    assert_eq!(f.metrics.reuse_percent, 0.0);
    assert_eq!(f.metrics.preuse_percent, 100.0);
}

#[test]
fn gauss_seidel_needs_skewing_then_tiling() {
    let r = Region {
        loops: vec![lp("L0", "g.c:7"), lp("L1", "g.c:8")],
        statements: vec![stmt(
            "S0",
            &[0, 1],
            &[0, 0, 0],
            "{ S0[t, i] : 0 <= t <= 7 and 0 <= i <= 29 }",
            240,
            vec![acc(&[0, 8], 8, false), acc(&[0, 8], 8, true)],
        )],
        dependences: vec![dep(
            "S0",
            "S0",
            "{ S0[t, i] -> S0[t, i - 1] : 0 <= t <= 7 and 1 <= i <= 29; S0[t, i] -> S0[t - 1, i] : 1 <= t <= 7 and 0 <= i <= 29; S0[t, i] -> S0[t - 1, i + 1] : 1 <= t <= 7 and 0 <= i <= 28 }",
        )],
        ..Region::default()
    };
    let f = analyze_region(&r, &Options::default()).unwrap();
    eprintln!("{f:#?}");
    assert!(
        f.loops.iter().all(|l| !l.parallel),
        "no parallel loop as written"
    );
    let k = kinds(&f);
    assert!(!k.contains(&"parallelize"), "{k:?}");
    assert!(k.contains(&"skew") && k.contains(&"tile"), "{k:?}");
    assert!(f.metrics.skew);
    assert_eq!(f.metrics.tile_depth, 2);
}

#[test]
fn jacobi_spatial_loops_are_parallel() {
    let r = Region {
        loops: vec![lp("L0", "j.c:7"), lp("L1", "j.c:8"), lp("L2", "j.c:10")],
        statements: vec![
            stmt("S0", &[0, 1], &[0, 0, 0], "{ S0[t, i] : 0 <= t <= 7 and 1 <= i <= 30 }", 240, vec![acc(&[0, 8], 8, true)]),
            stmt("S1", &[0, 2], &[0, 1, 0], "{ S1[t, i] : 0 <= t <= 7 and 1 <= i <= 30 }", 240, vec![acc(&[0, 8], 8, true)]),
        ],
        dependences: vec![
            dep("S0", "S1", "{ S1[t, i] -> S0[t, i] : 0 <= t <= 7 and 1 <= i <= 30 }"),
            dep(
                "S1",
                "S0",
                "{ S0[t, i] -> S1[t2, i2] : t2 = t - 1 and i - 1 <= i2 <= i + 1 and 1 <= t <= 7 and 1 <= i <= 30 and 1 <= i2 <= 30 }",
            ),
        ],
        ..Region::default()
    };
    let f = analyze_region(&r, &Options::default()).unwrap();
    eprintln!("{f:#?}");
    let by_id = |id: &str| f.loops.iter().find(|l| l.id == id).unwrap().parallel;
    assert!(!by_id("L0"));
    assert!(by_id("L1") && by_id("L2"));
}

#[test]
fn a_recurrence_is_not_parallel_and_says_why() {
    let r = Region {
        loops: vec![lp("L0", "r.c:6")],
        statements: vec![stmt(
            "S0",
            &[0],
            &[0, 0],
            "{ S0[i] : 1 <= i <= 31 }",
            31,
            vec![acc(&[4], 4, true)],
        )],
        dependences: vec![dep("S0", "S0", "{ S0[i] -> S0[i - 1] : 2 <= i <= 31 }")],
        ..Region::default()
    };
    let f = analyze_region(&r, &Options::default()).unwrap();
    assert!(!kinds(&f).contains(&"parallelize"));
    let why = f.why_not.expect("why_not");
    assert!(
        why.contains("carries") && why.contains("S0[i0] -> S0[-1 + i0]"),
        "{why}"
    );
}

/// An over-approximated self-dependence (a box around irregular pairs, as the folder gives for
/// a gather) also holds identical and backward pairs; the scheduler must still find a
/// schedule, and the loop carrying the real dependences is still found sequential.
#[test]
fn an_over_approximated_self_dependence_still_schedules() {
    let mut r = matmul();
    r.dependences = vec![Dependence {
        exact: false,
        ..dep(
            "S0",
            "S0",
            "{ S0[i0, i1, i2] -> S0[i0, i1, o2] : 0 <= i0 <= 7 and 0 <= i1 <= 7 and 0 <= i2 <= 7 and 0 <= o2 <= 7 }",
        )
    }];
    let f = analyze_region(&r, &Options::default()).expect("scheduled");
    assert!(f.why_not.is_none() || !f.suggestions.is_empty(), "{f:?}");
    let inner = f.loops.iter().find(|l| l.id == "L2").expect("L2");
    assert!(!inner.parallel);
    assert!(f.loops.iter().any(|l| l.id == "L0" && l.parallel));
}

/// Every loop of a region answered from its distances alone: matmul's i and j loops
/// parallel, k carrying its flow dependence, the three loops one permutable band.
fn assert_answered_without_isl(f: &feedback::Feedback) {
    let ids: Vec<&str> = f.loops.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["L0", "L1", "L2"], "{f:#?}");
    assert!(f.loops.iter().all(|l| l.by_distances), "{f:#?}");
    let par: Vec<bool> = f.loops.iter().map(|l| l.parallel).collect();
    assert_eq!(par, [true, true, false]);
    assert_eq!(f.loops[2].carries, ["flow"]);
    assert!(f.loops.iter().all(|l| l.permutable));
    assert_eq!(f.metrics.tile_depth, 3);
    assert_eq!(f.metrics.parallel_ops_percent, 100.0);
}

/// A region that needs more isl operations than its budget says so instead of running on,
/// and every loop still gets its answers: each phase has the budget afresh, so the loops are
/// answered and the scheduler's part is said to be skipped.
#[test]
fn a_region_over_the_isl_budget_says_so() {
    let opts = Options {
        isl_max_operations: 1_000,
        ..Options::default()
    };
    let f = analyze_region(&matmul(), &opts).expect("degraded, not failed");
    let why = f.why_not.clone().unwrap_or_default();
    assert!(why.contains("--isl-max-operations"), "{why}");
    let par: Vec<bool> = f.loops.iter().map(|l| l.parallel).collect();
    assert_eq!(par, [true, true, false], "{f:#?}");
}

/// The time budget stops isl too (operations vary in cost too much for a count alone); the
/// loops keep their answers (whether isl gave some before the clock stopped it or not).
#[test]
fn a_region_over_the_time_budget_says_so() {
    let opts = Options {
        isl_max_seconds: 0.0,
        ..Options::default()
    };
    let t0 = std::time::Instant::now();
    let f = analyze_region(&matmul(), &opts).expect("degraded, not failed");
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    let par: Vec<bool> = f.loops.iter().map(|l| l.parallel).collect();
    assert_eq!(par, [true, true, false], "{f:#?}");
}

/// With no isl at all (a budget of one operation), every loop is answered from its
/// dependences' distances, and the region says so.
#[test]
fn a_region_isl_cannot_start_on_is_answered_from_distances() {
    let opts = Options {
        isl_max_operations: 1,
        ..Options::default()
    };
    let f = analyze_region(&matmul(), &opts).expect("degraded, not failed");
    let why = f.why_not.clone().unwrap_or_default();
    assert!(why.contains("from its dependences alone"), "{why}");
    assert_answered_without_isl(&f);
}

/// Advice ranked by estimated gain: the interchange's cache-lines estimate first, then the
/// rest; tiles larger than the loops and threads for a few hundred instructions kept but
/// marked skipped, with the reason.
#[test]
fn matmul_advice_is_ranked_with_estimates_and_skips() {
    use feedback::{GainModel, GainOptions, SkipReason};
    let mut r = matmul();
    r.trips = vec![Some(8); 3];
    let opts = Options {
        gain: GainOptions {
            threads: Some(8),
            ..GainOptions::default()
        },
        ..Options::default()
    };
    let f = analyze_region(&r, &opts).unwrap();
    let ranks: Vec<usize> = f.suggestions.iter().map(|s| s.rating.rank).collect();
    assert_eq!(
        ranks,
        (1..=f.suggestions.len()).collect::<Vec<_>>(),
        "{f:#?}"
    );
    let find = |k: SuggestionKind| f.suggestions.iter().find(|s| s.kind == k).unwrap();
    let ic = find(SuggestionKind::Interchange);
    assert_eq!(ic.rating.rank, 1, "{:#?}", f.suggestions);
    let g = ic.rating.gain.as_ref().expect("an estimate");
    assert_eq!(g.model, GainModel::CacheLines);
    // A[i][k] along k and B[k][j] along k: one line each 8 iterations and one per iteration;
    // with j innermost only B's and C's rows stream.
    assert!(g.estimate > 1.5, "{g:?}");
    assert!(g.basis.contains("1.00 now"), "{}", g.basis);
    let tile = find(SuggestionKind::Tile);
    assert_eq!(
        tile.rating.skipped.as_ref().map(|s| s.reason),
        Some(SkipReason::FewIterations),
        "{tile:?}"
    );
    let par = find(SuggestionKind::Parallelize);
    assert_eq!(
        par.rating.skipped.as_ref().map(|s| s.reason),
        Some(SkipReason::LittleWork),
        "{par:?}"
    );
    assert!(par.rating.gain.as_ref().is_some_and(|g| g.estimate < 1.1));
    // Skipped advice ranks after all the advice that pays.
    let first_skip = f
        .suggestions
        .iter()
        .position(|s| s.rating.skipped.is_some())
        .unwrap();
    assert!(f.suggestions[first_skip..]
        .iter()
        .all(|s| s.rating.skipped.is_some()));
    // The code after follows the advice: the interchanged order, no tiles.
    assert!(f.code_after.contains("k.c:12 (L2)"), "{}", f.code_after);
    assert!(!f.code_after.contains("tiles of"), "{}", f.code_after);
    let inner = f
        .code_after
        .lines()
        .position(|l| l.contains("(L1)"))
        .unwrap();
    let middle = f
        .code_after
        .lines()
        .position(|l| l.contains("(L2)"))
        .unwrap();
    assert!(
        middle < inner,
        "L2 outside L1 after the interchange:\n{}",
        f.code_after
    );
}

/// On loops large enough for tiles, the tiled code shows tile and point loops.
#[test]
fn tiles_that_fit_are_estimated_and_generated() {
    let mut r = matmul();
    let n = 64i64;
    r.trips = vec![Some(64); 3];
    r.statements[0].domain =
        poly("{ S0[i0, i1, i2] : 0 <= i0 <= 63 and 0 <= i1 <= 63 and 0 <= i2 <= 63 }");
    r.statements[0].ops = 64 * 64 * 64;
    r.statements[0].accesses = vec![
        acc(&[8 * n, 0, 8], 8, false),
        acc(&[0, 8, 8 * n], 8, false),
        acc(&[8 * n, 8, 0], 8, false),
        acc(&[8 * n, 8, 0], 8, true),
    ];
    r.dependences = vec![dep(
        "S0",
        "S0",
        "{ S0[i0, i1, i2] -> S0[i0, i1, i2 - 1] : 0 <= i0 <= 63 and 0 <= i1 <= 63 and 1 <= i2 <= 63 }",
    )];
    let f = analyze_region(&r, &Options::default()).unwrap();
    let tile = f
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Tile)
        .expect("tile");
    assert!(tile.rating.skipped.is_none(), "{tile:?}");
    let g = tile.rating.gain.as_ref().expect("an estimate");
    assert!(
        g.estimate > 1.1 && g.basis.contains("with tiles of 32"),
        "{g:?}"
    );
    assert!(
        f.code_after.contains("tiles of 32 of k.c:10"),
        "{}",
        f.code_after
    );
    assert!(f.code_after.contains("32 * c"), "{}", f.code_after);
}
