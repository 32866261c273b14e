//! Control structure (issue 3): loop-nesting forests, recursive components, iteration vectors,
//! the schedule tree and the flame graph, on C kernels compiled at test time.

use std::collections::{BTreeSet, HashMap};
use tests::{compile, line_of, polyprof, polyprof_bin, trace_main, Kernel, Traced};

struct Analyzed {
    analysis: tracer::Analysis,
    folded: Vec<String>,
    /// (pc, context, coordinates) of every instruction.
    steps: Vec<(u64, usize, Vec<u64>)>,
}

fn analyze(k: &Kernel, t: &Traced) -> Analyzed {
    let elf = k.elf();
    let bin = symbols::Loaded::new(&elf, t.summary.load_bias);
    let entries = tracer::function_entries(bin);
    let mut steps = Vec::new();
    let analysis = tracer::analyze(t.events.as_slice(), &entries, |s| {
        steps.push((s.insn.pc, s.context, s.coords.to_vec()))
    })
    .expect("analysis");
    let naming = tracer::Naming::new(bin, &analysis.structure);
    let folded = naming.folded(&analysis.tree);
    Analyzed {
        analysis,
        folded,
        steps,
    }
}

/// The stacks of the folded lines, but for `[native]` frames: those show what native calls
/// cost, as measured, and a call measured at nothing has none.
fn stacks(folded: &[String]) -> BTreeSet<String> {
    folded
        .iter()
        .map(|l| l.rsplit_once(' ').expect("folded line").0.to_string())
        .filter(|s| !s.ends_with(" [native]"))
        .collect()
}

/// Total widths of the `[native]` stacks and of the others.
fn widths<S: AsRef<str>>(folded: &[S]) -> (u64, u64) {
    folded.iter().fold((0, 0), |(n, t), l| {
        let (stack, w) = l.as_ref().rsplit_once(' ').expect("folded line");
        let w: u64 = w.parse().expect("a width");
        if stack.ends_with(" [native]") {
            (n + w, t)
        } else {
            (n, t + w)
        }
    })
}

fn loop_frames(folded: &[String]) -> BTreeSet<String> {
    stacks(folded)
        .iter()
        .flat_map(|s| s.split(';').map(str::to_string).collect::<Vec<_>>())
        .filter(|f| f.starts_with("loop "))
        .collect()
}

#[test]
fn two_dimensional_nest_gives_two_nested_loop_frames() {
    let k = compile("nest2", &["-O2", "-g"]);
    let t = trace_main(&k.path, &["8"]);
    let a = analyze(&k, &t);
    let (outer, inner) = (line_of("nest2", "OUTER"), line_of("nest2", "INNER"));
    let want = format!("main;loop nest2.c:{outer};loop nest2.c:{inner}");
    assert!(
        stacks(&a.folded).contains(&want),
        "no stack {want} in {:#?}",
        a.folded
    );
    // Widths add up to the traced instructions, and to what the native calls cost in their
    // `[native]` frames.
    let (native, traced) = widths(&a.folded);
    assert_eq!(traced, t.summary.instructions);
    assert_eq!(native, t.summary.native_instructions);
    assert_eq!(a.analysis.tree.max_depth(), 2);
}

#[test]
fn loop_calling_a_function_with_a_loop_is_one_interprocedural_nest() {
    let k = compile("interproc", &["-O2", "-g"]);
    let t = trace_main(&k.path, &["8"]);
    let a = analyze(&k, &t);
    let (caller, callee) = (
        line_of("interproc", "CALLER_LOOP"),
        line_of("interproc", "CALLEE_LOOP"),
    );
    let want = format!("main;loop interproc.c:{caller};row_sum;loop interproc.c:{callee}");
    assert!(
        stacks(&a.folded).contains(&want),
        "no stack {want} in {:#?}",
        a.folded
    );
    // The callee's loop body runs with 2-D coordinates (i, j) covering the 8 x 8 square.
    let callee_nodes: BTreeSet<usize> = a
        .analysis
        .tree
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.depth == 2)
        .map(|(i, _)| i)
        .collect();
    let coords: BTreeSet<Vec<u64>> = a
        .steps
        .iter()
        .filter(|(_, c, _)| callee_nodes.contains(c))
        .map(|(_, _, v)| v.clone())
        .collect();
    assert_eq!(coords.len(), 64, "{coords:?}");
    assert!(coords.contains(&vec![7, 7]) && coords.contains(&vec![0, 0]));
}

#[test]
fn recursion_depth_does_not_deepen_the_tree_or_the_vectors() {
    let k = compile("recursion", &["-O1", "-g"]);
    let small = analyze(&k, &trace_main(&k.path, &["32"]));
    let large = analyze(&k, &trace_main(&k.path, &["128"]));
    assert_eq!(
        small.analysis.tree.nodes.len(),
        large.analysis.tree.nodes.len(),
        "schedule trees differ:\n{:#?}\n{:#?}",
        small.folded,
        large.folded
    );
    assert_eq!(stacks(&small.folded), stacks(&large.folded));
    let depth = |a: &Analyzed| a.steps.iter().map(|s| s.2.len()).max().unwrap_or(0);
    assert_eq!(depth(&small), depth(&large));
    assert!(depth(&small) >= 1, "the recursion is a loop dimension");
    assert!(
        small.folded.iter().any(|l| l.contains("recursion sum")),
        "{:#?}",
        small.folded
    );
    // The recursive loop's counter keeps increasing: calls and returns each iterate it.
    let max_iv = |a: &Analyzed| {
        a.steps
            .iter()
            .filter_map(|s| s.2.first().copied())
            .max()
            .unwrap_or(0)
    };
    assert!(max_iv(&large) > max_iv(&small) && max_iv(&large) >= 128 * 2 - 1);
    assert_eq!(a_component_count(&large), 1);
}

fn a_component_count(a: &Analyzed) -> usize {
    a.analysis.structure.components.len()
}

#[test]
fn irreducible_loop_is_handled() {
    let k = compile("irreducible", &["-O0", "-g"]);
    let t = trace_main(&k.path, &["20"]);
    let a = analyze(&k, &t);
    let f = &a.analysis.structure.funcs;
    assert!(
        f.iter()
            .any(|f| f.forest.loops.iter().any(|l| l.irreducible)),
        "entered once at its top and once by the goto, the loop is irreducible"
    );
    // Two nested loop frames: the repetition, and the goto loop inside it.
    let repeat = line_of("irreducible", "REPEAT");
    let (first, second) = (
        line_of("irreducible", "FIRST_HALF"),
        line_of("irreducible", "SECOND_HALF"),
    );
    let frames = loop_frames(&a.folded);
    assert_eq!(frames.len(), 2, "{frames:?} in {:#?}", a.folded);
    assert!(
        frames.contains(&format!("loop irreducible.c:{repeat}")),
        "{frames:?}"
    );
    assert!(
        frames
            .iter()
            .any(|f| (first..=second + 2).any(|l| *f == format!("loop irreducible.c:{l}"))),
        "{frames:?}"
    );
    assert_eq!(a.analysis.tree.max_depth(), 2);
    // Every instruction has distinct coordinates within its context and address.
    let mut seen = std::collections::HashSet::new();
    for (pc, ctx, coords) in &a.steps {
        assert!(
            seen.insert((*pc, *ctx, coords.clone())),
            "two instances of {pc:#x} share the vector {coords:?}"
        );
    }
}

#[test]
fn an_n_iteration_loop_gets_coordinates_0_to_n_minus_1() {
    let k = compile("nest2", &["-O1", "-g"]);
    let n = 5u64;
    let t = trace_main(&k.path, &["5"]);
    let a = analyze(&k, &t);
    let elf = k.elf();
    let body = line_of("nest2", "BODY");
    // The store of the loop body: a memory write at the body's line.
    let store_pcs: BTreeSet<u64> = t
        .insns()
        .filter(|i| {
            i.mem
                .iter()
                .any(|m| m.kind == ptrace_runner::AccessKind::Write)
                && elf
                    .location(i.pc - t.summary.load_bias)
                    .is_some_and(|l| l.line == body)
        })
        .map(|i| i.pc)
        .collect();
    assert_eq!(store_pcs.len(), 1, "{store_pcs:x?}");
    let pc = *store_pcs.iter().next().unwrap();
    let coords: Vec<Vec<u64>> = a
        .steps
        .iter()
        .filter(|s| s.0 == pc)
        .map(|s| s.2.clone())
        .collect();
    let want: Vec<Vec<u64>> = (0..n)
        .flat_map(|i| (0..n).map(move |j| vec![i, j]))
        .collect();
    assert_eq!(coords, want);
}

#[test]
fn optimisation_levels_give_the_same_loop_frames() {
    let mut seen = HashMap::new();
    for opt in ["-O0", "-O3"] {
        for kernel in ["nest2", "interproc"] {
            let k = compile(kernel, &[opt, "-g"]);
            let t = trace_main(&k.path, &["8"]);
            let a = analyze(&k, &t);
            let frames = loop_frames(&a.folded);
            let key = kernel.to_string();
            if let Some(prev) = seen.get(&key) {
                assert_eq!(prev, &frames, "{kernel}: -O0 vs -O3");
            } else {
                seen.insert(key, frames);
            }
        }
    }
}

#[test]
fn outer_loop_whose_back_edge_is_the_inner_test_keeps_its_own_name() {
    let outer = format!(
        "loop merged_latch.c:{}",
        line_of("merged_latch", "/* outer */")
    );
    let inner = format!(
        "loop merged_latch.c:{}",
        line_of("merged_latch", "/* inner */")
    );
    for opt in ["-O0", "-O2"] {
        let k = compile("merged_latch", &[opt, "-g"]);
        let t = trace_main(&k.path, &[]);
        let a = analyze(&k, &t);
        let nest = format!("main;{outer};{inner}");
        assert!(
            stacks(&a.folded).contains(&nest),
            "{opt}: the solve's nest is `{nest}`, yet the stacks are:\n{}",
            a.folded.join("\n")
        );
    }
}

#[test]
fn cli_writes_the_flame_graph_and_folded_stacks() {
    let k = compile("interproc", &["-O2", "-g"]);
    let run = polyprof(polyprof_bin!(), &[k.path.as_os_str(), "8".as_ref()], b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    let report = run.report();
    let folded = std::fs::read_to_string(run.out.join("stacks.folded")).unwrap();
    let lines: Vec<&str> = folded.lines().collect();
    let (native, traced) = widths(&lines);
    assert_eq!(Some(traced), report["trace"]["instructions"].as_u64());
    assert_eq!(
        Some(native),
        report["trace"]["native_cost"]["instructions"].as_u64()
    );
    assert!(
        folded.lines().any(|l| l.starts_with("main;call printf ")),
        "{folded}"
    );
    let svg = std::fs::read_to_string(run.out.join("flamegraph.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("row_sum") && svg.contains("instructions"));
    let title = format!("{} 8", k.path.display());
    assert!(
        svg.contains(&title),
        "the title names the program and its arguments"
    );
    let callee = line_of("interproc", "CALLEE_LOOP");
    assert!(report["hot_loops"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["stack"]
            .as_str()
            .unwrap()
            .ends_with(&format!("row_sum;loop interproc.c:{callee}"))));
    // The last lines on stderr name the flame graph and the text report.
    let tail: Vec<&str> = run.output.stderr.lines().rev().take(2).collect();
    assert!(
        tail.iter().any(|l| l.contains("flamegraph.svg")),
        "{tail:?}"
    );
    assert!(tail.iter().any(|l| l.contains("report.txt")), "{tail:?}");
}

/// A loop whose body is an inlined call starts in the callee's code; it is still named by its
/// own loop statement, not by a line of the callee (which would give two loops one name).
#[test]
fn loop_around_an_inlined_call_is_named_by_its_own_line() {
    let (time, cols, rows) = (
        line_of("inlined", "TIME"),
        line_of("inlined", "COLS"),
        line_of("inlined", "ROWS"),
    );
    for opt in ["-O1", "-O2"] {
        let k = compile("inlined", &[opt, "-g"]);
        let t = trace_main(&k.path, &[]);
        let a = analyze(&k, &t);
        let want =
            format!("main;loop inlined.c:{time};loop inlined.c:{cols};loop inlined.c:{rows}");
        assert!(
            stacks(&a.folded).contains(&want),
            "{opt}: no stack {want} in {:#?}",
            a.folded
        );
    }
}

/// A loop around a call gcc -O2 does not inline (Rodinia myocyte's `for (i ...)` around
/// `solver(...)`), in a source file that is not UTF-8 (myocyte's main.c is Windows-1252): the
/// latch is the call's block, with the call's line (gcc -O2 enters myocyte's loop at its
/// test, as `-fno-tree-ch` makes it do here); the loop is named by its `for` line, which is
/// read all the same.
#[test]
fn loop_around_a_call_in_a_file_not_in_utf8_is_named_by_its_for() {
    let src = std::fs::read(tests::kernels_dir().join("cp1252_call.c")).expect("the kernel");
    assert!(
        String::from_utf8(src.clone()).is_err(),
        "the kernel must not be UTF-8"
    );
    let text = String::from_utf8_lossy(&src);
    let at = |mark: &str| {
        text.lines()
            .position(|l| l.contains(mark))
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("no {mark}"))
    };
    let (for_line, call_line) = (at("/* FOR */"), at("/* CALL */"));
    for opt in ["-O0", "-O2 -fno-tree-ch"] {
        let mut flags: Vec<&str> = opt.split(' ').collect();
        flags.push("-g");
        let k = compile("cp1252_call", &flags);
        let t = trace_main(&k.path, &[]);
        let a = analyze(&k, &t);
        let stacks = stacks(&a.folded);
        let want = format!("main;loop cp1252_call.c:{for_line}");
        assert!(
            stacks
                .iter()
                .any(|s| s == &want || s.starts_with(&format!("{want};"))),
            "{opt}: no stack {want} in {:#?}",
            a.folded
        );
        assert!(
            !stacks
                .iter()
                .any(|s| s.contains(&format!("loop cp1252_call.c:{call_line}"))),
            "{opt}: a loop named by the call's line: {:#?}",
            a.folded
        );
    }
}
