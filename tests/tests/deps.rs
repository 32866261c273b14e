//! Dependences (issue 4): shadow memory and register shadow on C kernels compiled at test time.

use std::collections::HashMap;
use tests::{compile, line_of, trace_main, Kernel, Traced};
use tracer::{DepKind, Through};

/// A dependence instance, owned.
#[derive(Clone, Debug)]
struct D {
    kind: DepKind,
    through: Through,
    producer: u64,
    consumer: u64,
    pc: Vec<u64>,
    cc: Vec<u64>,
    location: u64,
}

struct Deps {
    deps: Vec<D>,
    /// Source line of each traced instruction address.
    lines: HashMap<u64, u32>,
    /// Register values written by each instruction, in order.
    values: HashMap<u64, Vec<u64>>,
}

impl Deps {
    fn line(&self, pc: u64) -> u32 {
        self.lines.get(&pc).copied().unwrap_or(0)
    }

    fn between(&self, from: u32, to: u32) -> impl Iterator<Item = &D> {
        self.deps
            .iter()
            .filter(move |d| self.line(d.producer) == from && self.line(d.consumer) == to)
    }

    /// An instruction whose produced values step by a constant: an induction variable.
    fn is_induction(&self, pc: u64) -> bool {
        let v = match self.values.get(&pc) {
            Some(v) if v.len() >= 2 => v,
            _ => return false,
        };
        let d = v[1].wrapping_sub(v[0]);
        v.windows(2).all(|w| w[1].wrapping_sub(w[0]) == d)
    }
}

fn deps_of(k: &Kernel, t: &Traced) -> Deps {
    let elf = k.elf();
    let bin = symbols::Loaded::new(&elf, t.summary.load_bias);
    let entries = tracer::function_entries(bin);
    let mut deps = Vec::new();
    let mut values: HashMap<u64, Vec<u64>> = HashMap::new();
    tracer::analyze_with_deps(
        t.events.as_slice(),
        &entries,
        tracer::DepOptions::default(),
        |s| {
            if let Some(r) = s
                .insn
                .regs
                .iter()
                .find(|r| r.reg.full_register() != iced_x86::Register::RSP)
            {
                values.entry(s.insn.pc).or_default().push(r.value);
            }
        },
        |d| {
            deps.push(D {
                kind: d.kind,
                through: d.through,
                producer: d.producer.pc,
                consumer: d.consumer.pc,
                pc: d.producer_coords.to_vec(),
                cc: d.consumer_coords.to_vec(),
                location: d.location,
            })
        },
    )
    .expect("analysis");
    let lines = t
        .insns()
        .map(|i| {
            let l = bin.location(i.pc).map_or(0, |l| l.line);
            (i.pc, l)
        })
        .collect();
    Deps {
        deps,
        lines,
        values,
    }
}

/// Carried by a loop: both ends in the same loop nest, at different iterations.
fn carried(d: &D) -> bool {
    d.pc.len() == d.cc.len() && d.pc != d.cc
}

#[test]
fn matmul_accumulation_carries_a_flow_dependence_from_k_minus_1_to_k() {
    let acc = line_of("dep_matmul", "ACCUMULATE");
    for opt in ["-O0", "-O2"] {
        let k = compile("dep_matmul", &[opt, "-g", "-fno-tree-vectorize"]);
        let t = trace_main(&k.path, &["5"]);
        let d = deps_of(&k, &t);
        let along_k: Vec<&D> = d
            .between(acc, acc)
            .filter(|d| d.kind == DepKind::Flow && d.cc.len() == 3 && d.pc.len() == 3)
            .filter(|d| d.cc[0] == d.pc[0] && d.cc[1] == d.pc[1] && d.cc[2] == d.pc[2] + 1)
            .collect();
        // One instance per (i, j, k >= 1).
        let instances: std::collections::BTreeSet<Vec<u64>> =
            along_k.iter().map(|d| d.cc.clone()).collect();
        assert_eq!(instances.len(), 5 * 5 * 4, "{opt}: {along_k:?}");
        let through: std::collections::BTreeSet<_> = along_k.iter().map(|d| d.through).collect();
        eprintln!("{opt}: the accumulation goes through {through:?}");
    }
}

#[test]
fn a_i_from_a_i_minus_1_is_a_distance_1_flow_dependence() {
    let chain = line_of("dep_chain", "CHAIN");
    let k = compile("dep_chain", &["-O1", "-g"]);
    let t = trace_main(&k.path, &["32"]);
    let d = deps_of(&k, &t);
    let dist1: Vec<&D> = d
        .between(chain, chain)
        .filter(|d| d.kind == DepKind::Flow)
        .filter(|d| d.cc.len() == 1 && d.pc.len() == 1 && d.cc[0] == d.pc[0] + 1)
        .filter(|x| !d.is_induction(x.producer))
        .collect();
    assert!(dist1.len() >= 30, "{dist1:?}");
}

#[test]
fn a_copy_loop_carries_no_dependence_but_its_induction_variable() {
    let copy = line_of("dep_chain", "COPY");
    let k = compile("dep_chain", &["-O1", "-g"]);
    let t = trace_main(&k.path, &["32"]);
    let d = deps_of(&k, &t);
    let consumers: Vec<&D> = d
        .deps
        .iter()
        .filter(|x| d.line(x.consumer) == copy && x.kind == DepKind::Flow && carried(x))
        .collect();
    assert!(
        !consumers.is_empty(),
        "the addresses depend on the loop counter"
    );
    for x in consumers {
        assert_eq!(x.through, Through::Register, "{x:?}");
        assert!(
            d.is_induction(x.producer),
            "a carried dependence from a non-induction producer: {x:?}"
        );
    }
}

#[test]
fn a_reused_scalar_temporary_gives_anti_and_output_dependences_only() {
    let (w, r) = (
        line_of("dep_scalar", "TEMP_WRITE"),
        line_of("dep_scalar", "TEMP_READ"),
    );
    let k = compile("dep_scalar", &["-O0", "-g"]);
    let t = trace_main(&k.path, &["16"]);
    let d = deps_of(&k, &t);
    // The temporary's stack slot: where the TEMP_WRITE line stores.
    let slot = t
        .insns()
        .filter(|i| d.line(i.pc) == w)
        .flat_map(|i| i.mem.iter())
        .filter(|m| m.kind == ptrace_runner::AccessKind::Write)
        .map(|m| m.addr)
        .next()
        .expect("the store to t");
    let on_slot: Vec<&D> = d
        .deps
        .iter()
        .filter(|x| x.through == Through::Memory && x.location == slot)
        .filter(|x| [w, r].contains(&d.line(x.producer)) && [w, r].contains(&d.line(x.consumer)))
        .collect();
    let kinds = |c: bool| -> std::collections::BTreeSet<DepKind> {
        on_slot
            .iter()
            .filter(|x| carried(x) == c)
            .map(|x| x.kind)
            .collect()
    };
    assert_eq!(
        kinds(true),
        [DepKind::Anti, DepKind::Output].into_iter().collect(),
        "carried: {on_slot:?}"
    );
    assert_eq!(
        kinds(false),
        [DepKind::Flow].into_iter().collect(),
        "{on_slot:?}"
    );
}

#[test]
fn a_value_flows_through_an_argument_and_a_return() {
    let (callee, caller) = (line_of("dep_call", "CALLEE"), line_of("dep_call", "CALLER"));
    let k = compile("dep_call", &["-O1", "-g"]);
    let t = trace_main(&k.path, &["8"]);
    let d = deps_of(&k, &t);
    let reg_flow = |from: u32, to: u32| {
        d.between(from, to)
            .filter(|x| x.kind == DepKind::Flow && x.through == Through::Register)
            .count()
    };
    assert!(reg_flow(caller, callee) >= 8, "argument: main -> triple");
    assert!(
        reg_flow(callee, caller) >= 8,
        "return value: triple -> main"
    );
}

#[test]
fn bytes_read_from_a_file_and_copied_by_memcpy_are_produced_by_the_calls() {
    let (fill_buf, fill_src, read_buf, read_dst) = (
        line_of("dep_file", "FILL_BUF"),
        line_of("dep_file", "FILL_SRC"),
        line_of("dep_file", "READ_BUF"),
        line_of("dep_file", "READ_DST"),
    );
    let (call_read, call_memcpy) = (
        line_of("dep_file", "CALL_READ"),
        line_of("dep_file", "CALL_MEMCPY"),
    );
    let k = compile("dep_file", &["-O1", "-g"]);
    let data = k.dir.path().join("data");
    std::fs::write(&data, [7u8; 32]).unwrap();
    let t = trace_main(&k.path, &[data.to_str().unwrap(), "32"]);
    assert_eq!(t.summary.exit, Some(ptrace_runner::ExitStatus::Code(0)));
    let d = deps_of(&k, &t);
    let mem_flow = |from: u32, to: u32| {
        d.between(from, to)
            .filter(|x| x.kind == DepKind::Flow && x.through == Through::Memory)
            .count()
    };
    // A natively-run library call is a statement of its own (the `call` instruction's
    // instance): read() writes buf, memcpy reads src and writes dst. (Before, memcpy copied the
    // writers of src to dst, so FILL_SRC flowed straight into READ_DST; with the call as a
    // statement, a schedule that moves the copy is checked against both halves.)
    assert_eq!(mem_flow(fill_buf, read_buf), 0, "read() refilled buf");
    assert!(
        mem_flow(call_read, read_buf) >= 32,
        "read() produced what it read"
    );
    assert!(
        mem_flow(fill_src, call_memcpy) >= 32,
        "memcpy(dst, src) reads src"
    );
    assert!(
        mem_flow(call_memcpy, read_dst) >= 32,
        "memcpy(dst, src) produces dst"
    );
    assert_eq!(mem_flow(fill_src, read_dst), 0, "memcpy overwrote dst");
}
