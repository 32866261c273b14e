//! Library-level end-to-end tests: C kernels run under `ptrace_runner::StepEngine` into a
//! `VecSink`, and the event stream is checked against the kernels' symbols and code.

use ptrace_runner::{AccessKind, ExitStatus, OwnedEvent, TransferKind};
use std::collections::{BTreeMap, BTreeSet};
use tests::{
    check_events_against_code, compile, exec_ranges, in_ranges, options_from_main, trace,
    trace_main,
};

/// Events of `for (i = 0; i < N; i++) a[i] = i * 3;` over a global `int a[64]`.
#[test]
fn tiny_loop_events() {
    const N: u64 = 64;
    let k = compile("loop", &["-O1", "-g", "-fno-tree-vectorize"]);
    let elf = k.elf();
    let t = trace_main(&k.path, &[]);
    assert_eq!(t.summary.exit, Some(ExitStatus::Code(0)), "{:?}", t.summary);
    assert!(t.summary.complete && t.summary.started, "{:?}", t.summary);
    assert_eq!(t.summary.engine, "step");
    assert_eq!(t.summary.instructions, t.insns().count() as u64);
    let bias = t.summary.load_bias;
    let ranges = exec_ranges(symbols::Loaded::new(&elf, bias));
    check_events_against_code(&t, Some(&ranges));

    // The first traced instruction is main.
    let main = elf.symbol_address("main").unwrap() + bias;
    assert_eq!(
        t.insns().next().map(|i| i.pc),
        Some(main),
        "tracing starts at main"
    );

    // The one instruction that writes `a`.
    let a = elf.symbol_address("a").expect("symbol a") + bias;
    let a_end = a + 4 * N;
    let mut writers: BTreeMap<u64, Vec<(u64, u32)>> = BTreeMap::new();
    for i in t.insns() {
        for m in &i.mem {
            if m.kind == AccessKind::Write && m.addr < a_end && m.addr + m.size as u64 > a {
                writers.entry(i.pc).or_default().push((m.addr, m.size));
            }
        }
    }
    assert_eq!(writers.len(), 1, "instructions writing `a`: {writers:x?}");
    let (&store_pc, writes) = writers.iter().next().unwrap();
    assert_eq!(writes.len() as u64, N, "the store into `a` runs N times");
    for (k, &(addr, size)) in writes.iter().enumerate() {
        assert_eq!(size, 4, "write {k} is not sizeof(int)");
        assert_eq!(addr, a + 4 * k as u64, "write {k} is not &a[{k}]");
    }
    assert_eq!(writes[0].0, a, "the first write is &a[0]");

    // The loop's backward conditional branch, around the store.
    let mut count: BTreeMap<u64, u64> = BTreeMap::new();
    for i in t.insns() {
        *count.entry(i.pc).or_default() += 1;
    }
    let back: BTreeSet<(u64, u64)> = t
        .insns()
        .filter_map(|i| {
            let tr = i.transfer?;
            let taken = tr.target != i.pc + i.len as u64;
            (tr.kind == TransferKind::CondJump && taken && tr.target <= store_pc && i.pc > store_pc)
                .then_some((i.pc, tr.target))
        })
        .collect();
    assert_eq!(
        back.len(),
        1,
        "backward branches around the store: {back:x?}"
    );
    let (branch_pc, head) = *back.iter().next().unwrap();
    let branch_runs = count[&branch_pc];
    assert!(
        (N - 1..=N + 1).contains(&branch_runs),
        "the loop branch ran {branch_runs} times, expected {N} ± 1"
    );
    let taken = t
        .insns()
        .filter(|i| i.pc == branch_pc && i.transfer.unwrap().target == head)
        .count() as u64;
    assert!(
        (N - 2..=N).contains(&taken),
        "the loop branch was taken {taken} times"
    );
    // Every instruction of the loop body runs N times (± 1 for the loop's test).
    let body: Vec<(u64, u64)> = count
        .range(head..=branch_pc)
        .map(|(&pc, &c)| (pc, c))
        .collect();
    assert!(body.len() >= 3, "loop body too small: {body:x?}");
    for &(pc, c) in &body {
        assert!(
            (N - 1..=N + 1).contains(&c),
            "loop instruction {pc:#x} ran {c} times: {body:x?}"
        );
    }
    assert_eq!(count[&store_pc], N);

    // printf ran natively, as one library call.
    let names: Vec<_> = t.lib_calls().filter_map(|c| c.name.as_deref()).collect();
    assert!(
        names.iter().any(|n| n.contains("printf")),
        "library calls: {names:?}"
    );
}

/// A SIGUSR1 handler in the executable is traced when the signal is delivered.
#[test]
fn signal_handler_is_traced() {
    let k = compile("signal", &["-O0", "-g"]);
    let elf = k.elf();
    let t = trace_main(&k.path, &[]);
    assert_eq!(t.summary.exit, Some(ExitStatus::Code(0)), "{:?}", t.summary);
    assert!(t.summary.complete, "{:?}", t.summary);
    let bias = t.summary.load_bias;

    let link = elf.symbol_address("on_usr1").expect("symbol on_usr1");
    let size = elf.function_at(link).expect("function on_usr1").size;
    assert!(size > 0);
    let (start, end) = (link + bias, link + bias + size);
    let in_handler = t.insns().filter(|i| (start..end).contains(&i.pc)).count();
    assert!(in_handler > 0, "no instruction of the handler was traced");
    let entries = t.insns().filter(|i| i.pc == start).count();
    assert_eq!(
        entries, 2,
        "the handler's first instruction ran {entries} times (2 signals)"
    );
    // The handler's loop ran 10 times per signal: its loop body is stepped.
    assert!(
        in_handler >= 2 * 10 * 3,
        "only {in_handler} handler instructions traced"
    );

    let signals = t
        .events
        .iter()
        .filter(|e| matches!(e, OwnedEvent::Signal { signo, .. } if *signo == libc::SIGUSR1))
        .count();
    assert_eq!(signals, 2, "SIGUSR1 deliveries seen");

    check_events_against_code(&t, Some(&exec_ranges(symbols::Loaded::new(&elf, bias))));
}

/// Library calls run natively by default; with `trace_libs` they are stepped.
#[test]
fn library_calls_are_not_stepped_by_default() {
    let k = compile("libcalls", &["-O0", "-g", "-fno-builtin"]);
    let elf = k.elf();
    let t = trace_main(&k.path, &[]);
    assert_eq!(t.summary.exit, Some(ExitStatus::Code(0)), "{:?}", t.summary);
    assert!(t.summary.complete, "{:?}", t.summary);
    let bias = t.summary.load_bias;
    let ranges = exec_ranges(symbols::Loaded::new(&elf, bias));

    for i in t.insns() {
        assert!(
            in_ranges(&ranges, i.pc),
            "instruction at {:#x} (link-time {:#x}) is outside the executable's code",
            i.pc,
            symbols::Loaded::new(&elf, bias).link(i.pc)
        );
    }
    let names: Vec<&str> = t.lib_calls().filter_map(|c| c.name.as_deref()).collect();
    for (name, times) in [("puts", 3), ("memset", 3), ("strlen", 3)] {
        let n = names.iter().filter(|&&n| n == name).count();
        assert_eq!(n, times, "LibCall events named {name}: {names:?}");
    }
    // Every call returned (LibReturn right where the call said).
    let returns = t
        .events
        .iter()
        .filter(|e| matches!(e, OwnedEvent::LibReturn { .. }))
        .count();
    assert!(returns >= 10, "only {returns} library calls returned");

    let mut opts = options_from_main(&k.path, &[]);
    opts.trace_libs = true;
    let all = trace(opts);
    assert_eq!(
        all.summary.exit,
        Some(ExitStatus::Code(0)),
        "{:?}",
        all.summary
    );
    let outside = all.insns().filter(|i| !in_ranges(&ranges, i.pc)).count();
    assert!(
        outside > 0,
        "trace_libs: no instruction outside the executable"
    );
    assert!(
        all.summary.instructions > t.summary.instructions,
        "trace_libs traced {} instructions, not more than {} without",
        all.summary.instructions,
        t.summary.instructions
    );
    // main's own instructions are the same in both runs.
    let link = elf.symbol_address("main").unwrap();
    let size = elf.function_at(link).expect("function main").size;
    let main = link + bias..link + bias + size;
    let in_main = |t: &tests::Traced| t.insns().filter(|i| main.contains(&i.pc)).count();
    assert!(in_main(&t) > 30, "main ran {} instructions", in_main(&t));
    assert_eq!(
        in_main(&all),
        in_main(&t),
        "instructions of main with and without trace_libs"
    );

    check_events_against_code(&t, Some(&ranges));
    check_events_against_code(&all, None);
}

/// REP string instructions: one event per iteration, each with the element's address and size.
#[test]
fn rep_string_instructions_one_event_per_iteration() {
    use iced_x86::Mnemonic;
    let k = compile("rep", &["-O1", "-g"]);
    let elf = k.elf();
    let t = trace_main(&k.path, &[]);
    assert_eq!(t.summary.exit, Some(ExitStatus::Code(0)), "{:?}", t.summary);
    let bias = t.summary.load_bias;
    let qwords = elf.symbol_address("qwords").unwrap() + bias;
    let src = elf.symbol_address("src").unwrap() + bias;
    let dst = elf.symbol_address("dst").unwrap() + bias;

    let mut code = BTreeMap::new();
    for e in &t.events {
        if let OwnedEvent::Code { addr, bytes } = e {
            code.insert(*addr, tests::decode_at(*addr, bytes));
        }
    }
    let rep_pcs = |m: Mnemonic| -> Vec<u64> {
        let mut pcs: Vec<u64> = Vec::new();
        for i in t.insns() {
            let d = &code[&i.pc];
            if d.mnemonic() == m && d.has_rep_prefix() && !pcs.contains(&i.pc) {
                pcs.push(i.pc);
            }
        }
        pcs
    };
    let at = |pc: u64| t.insns().filter(move |i| i.pc == pc);
    let read = |addr, size| ptrace_runner::MemAccess {
        addr,
        size,
        kind: AccessKind::Read,
    };
    let write = |addr, size| ptrace_runner::MemAccess {
        addr,
        size,
        kind: AccessKind::Write,
    };

    let stos = rep_pcs(Mnemonic::Stosq);
    assert!(!stos.is_empty(), "no rep stosq traced");
    let mems: Vec<_> = at(stos[0]).map(|i| i.mem.clone()).collect();
    let want: Vec<_> = (0..5).map(|k| vec![write(qwords + 8 * k, 8)]).collect();
    assert_eq!(mems, want, "rep stosq with rcx = 5");
    // The count-0 rep stosq accesses nothing.
    for &pc in &stos[1..] {
        let n = at(pc).count();
        assert!(n <= 1, "rep stosq with rcx = 0 gave {n} events");
        assert!(
            at(pc).all(|i| i.mem.is_empty()),
            "rep stosq with rcx = 0 accessed memory"
        );
    }

    let movs = rep_pcs(Mnemonic::Movsb);
    assert_eq!(movs.len(), 1, "rep movsb instructions traced");
    let mems: Vec<_> = at(movs[0]).map(|i| i.mem.clone()).collect();
    let want: Vec<_> = (0..7)
        .map(|k| vec![read(src + k, 1), write(dst + k, 1)])
        .collect();
    assert_eq!(mems, want, "rep movsb with rcx = 7");

    check_events_against_code(&t, Some(&exec_ranges(symbols::Loaded::new(&elf, bias))));
}
