//! Tests of the variable queries ([`ElfFile::variable_in_register`],
//! [`ElfFile::stack_variable`], [`ElfFile::global_variable`]) on C programs
//! compiled at test time. Instructions are found without reading
//! disassembly by eye: by their source line (DWARF line info) and by
//! decoding the function's bytes with iced-x86.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use iced_x86::{Instruction, Mnemonic, OpKind, Register};

use super::{cc, insns, junk_copy, open, INLINE_C};
use crate::regs::{RBP, RDI, RSI, RSP};
use crate::*;

/// Each line whose behaviour a test checks carries a `/* TAG */` marker;
/// [`line_of`] finds it.
const VARS_C: &str = r#"#include <stdio.h>
#include <stdlib.h>

double g_scale = 2.5;
int g_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
int g_grid[3][5];

__attribute__((noinline)) double sum_array(const double *p, int n) {
    double s = 0.0; /* S_DECL */
    for (int i = 0; i < n; i++)
        s += p[i]; /* SUM */
    return s * g_scale;
}

__attribute__((noinline)) long scaled_sum(const long *v, long n) {
    long total = 0; /* TOTAL_DECL */
    for (long k = 0; k < n; k++)
        total += v[k] * 3; /* TOTAL */
    return total;
}

__attribute__((noinline)) int fill(int m) {
    int a[16]; /* A_DECL */
    for (int j = 0; j < 16; j++) /* J1 */
        a[j] = j * m; /* FILL */
    int t = 0; /* T_DECL */
    for (int j = 0; j < 16; j++) /* J2 */
        t += a[(j * 7) & 15]; /* READ */
    return t;
}

__attribute__((noinline)) long pick(const long *table, long i) {
    return table[i] + table[i + 1]; /* PICK */
}

struct pair {
    long a, b;
};

__attribute__((noinline)) long mul_pair(struct pair q) {
    return q.a * q.b; /* PAIR */
}

__attribute__((noinline)) int counter(void) {
    static int calls;
    return ++calls; /* COUNTER */
}

int main(int argc, char **argv) {
    (void)argv;
    int n = argc + 99;
    double *p = malloc(n * sizeof *p);
    long *v = malloc(n * sizeof *v);
    for (int i = 0; i < n; i++) {
        p[i] = i;
        v[i] = i;
    }
    g_grid[argc % 3][argc % 5] = argc;
    struct pair q = {argc, n};
    printf("%f %ld %d %ld %d %d %ld\n", sum_array(p, n), scaled_sum(v, n), fill(argc),
           pick(v, argc), counter(), g_table[argc & 7], mul_pair(q));
    free(p);
    free(v);
    return 0;
}
"#;

/// 1-based line of the line of `src` containing `/* tag */`.
fn line_of(src: &str, tag: &str) -> u32 {
    let marker = format!("/* {tag} */");
    let i = src
        .lines()
        .position(|l| l.contains(&marker))
        .unwrap_or_else(|| panic!("no {marker}"));
    u32::try_from(i + 1).unwrap()
}

/// The instructions of `name` that DWARF places on source line `line`.
fn on_line(file: &ElfFile, name: &str, line: u32) -> Vec<Instruction> {
    insns(file, name)
        .into_iter()
        .filter(|i| file.location(i.ip()).is_some_and(|l| l.line == line))
        .collect()
}

fn dwarf_of(reg: Register) -> u16 {
    let name = format!("{reg:?}").to_lowercase();
    dwarf_register(&name).unwrap_or_else(|| panic!("no DWARF number for {name}"))
}

/// `(base, disp)` of an instruction's memory operand based on `base`.
fn mem_operand(ins: &Instruction, base: Register) -> Option<(u16, i64)> {
    let has_mem = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory);
    (has_mem && ins.memory_base() == base)
        .then(|| (dwarf_of(base), ins.memory_displacement64() as i64))
}

/// The rsp-based load of `a` on the line marked READ in `fill`, and its displacement.
fn load_of_a(f: &ElfFile) -> (Instruction, i64) {
    let read = line_of(VARS_C, "READ");
    insns(f, "fill")
        .into_iter()
        .filter(|ins| f.location(ins.ip()).is_some_and(|l| l.line == read))
        .find_map(|ins| mem_operand(&ins, Register::RSP).map(|(_, d)| (ins, d)))
        .expect("an rsp-based load of a")
}

fn name(v: &Option<Variable>) -> Option<&str> {
    v.as_ref().map(|v| v.name.as_str())
}

/// Variables named by the `rbp`-based memory operands of `name`'s
/// instructions on `line`.
fn rbp_names(file: &ElfFile, name: &str, line: u32) -> BTreeSet<String> {
    on_line(file, name, line)
        .iter()
        .filter_map(|ins| {
            let (base, disp) = mem_operand(ins, Register::RBP)?;
            Some(file.stack_variable(ins.ip(), base, disp)?.name)
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn o0_frame_slots() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(&cc(dir.path(), "vars", VARS_C, &["-O0", "-g"]));

    // `s += p[i]`: p, i and s all live in rbp-based slots.
    let sum = line_of(VARS_C, "SUM");
    assert_eq!(rbp_names(&f, "sum_array", sum), set(&["i", "p", "s"]));
    let load_s = on_line(&f, "sum_array", sum)
        .into_iter()
        .find(|ins| {
            mem_operand(ins, Register::RBP).is_some()
                && (0..ins.op_count())
                    .any(|k| ins.op_kind(k) == OpKind::Register && ins.op_register(k).is_xmm())
        })
        .expect("an xmm access to an rbp slot");
    let (base, disp) = mem_operand(&load_s, Register::RBP).unwrap();
    let s = f.stack_variable(load_s.ip(), base, disp).expect("s");
    assert_eq!(s.name, "s");
    assert_eq!(s.kind, VariableKind::Local);
    assert_eq!((s.offset, s.size), (0, Some(8)));
    assert_eq!(s.function.as_deref(), Some("sum_array"));
    assert_eq!(s.decl_line, Some(line_of(VARS_C, "S_DECL")));
    assert!(s.dims.is_empty() && s.elem_size.is_none(), "{s:?}");
    assert_eq!(s.to_string(), "s");
    // Bytes inside `s` name it at their offset; the slot is 8 bytes.
    let mid = f
        .stack_variable(load_s.ip(), base, disp + 5)
        .expect("inside s");
    assert_eq!((mid.name.as_str(), mid.offset), ("s", 5));
    assert_ne!(
        name(&f.stack_variable(load_s.ip(), base, disp + 8)).unwrap_or(""),
        "s"
    );
    // rsp-based at this pc is not related to the CFA (rbp-based frame):
    // nothing, rather than a guess.
    assert_eq!(f.stack_variable(load_s.ip(), RSP, disp), None);
    let p = on_line(&f, "sum_array", sum)
        .iter()
        .find_map(|ins| {
            let (base, disp) = mem_operand(ins, Register::RBP)?;
            f.stack_variable(ins.ip(), base, disp)
                .filter(|v| v.name == "p")
        })
        .unwrap();
    assert_eq!((p.kind, p.size), (VariableKind::Parameter, Some(8)));
    // `const double *p`: the qualifier is followed to the 8-byte double.
    assert_eq!(p.pointee_size, Some(8));

    // `a[j] = j * m`: the store `[rbp+rax*4-0x50]` is into `a`.
    let fill = line_of(VARS_C, "FILL");
    let store = on_line(&f, "fill", fill)
        .into_iter()
        .find(|ins| {
            mem_operand(ins, Register::RBP).is_some() && ins.memory_index() != Register::None
        })
        .expect("an indexed store");
    let (base, disp) = mem_operand(&store, Register::RBP).unwrap();
    let a = f.stack_variable(store.ip(), base, disp).expect("a");
    assert_eq!(a.name, "a");
    assert_eq!(a.offset, 0);
    assert_eq!((a.size, a.elem_size), (Some(64), Some(4)));
    assert_eq!(a.dims, vec![16]);
    assert_eq!(a.pointee_size, None, "an array is not a pointer");
    assert_eq!(a.decl_line, Some(line_of(VARS_C, "A_DECL")));
    assert_eq!(a.element(), Some(vec![0]));
    let a3 = f.stack_variable(store.ip(), base, disp + 12).expect("a[3]");
    assert_eq!((a3.offset, a3.element()), (12, Some(vec![3])));
    assert_eq!(a3.to_string(), "a[3]");
    assert_eq!(
        f.stack_variable(store.ip(), base, disp + 14)
            .map(|v| v.to_string()),
        Some("a[3]+2".to_string())
    );
    assert_ne!(
        name(&f.stack_variable(store.ip(), base, disp + 64)).unwrap_or(""),
        "a"
    );
    assert_ne!(
        name(&f.stack_variable(store.ip(), base, disp - 1)).unwrap_or(""),
        "a"
    );

    // The two `j`s are distinct variables in distinct lexical blocks: each
    // loop's accesses name its own (by declaration line).
    let j_lines = |line: u32| -> BTreeSet<Option<u32>> {
        on_line(&f, "fill", line)
            .iter()
            .filter_map(|ins| {
                let (base, disp) = mem_operand(ins, Register::RBP)?;
                f.stack_variable(ins.ip(), base, disp)
            })
            .filter(|v| v.name == "j")
            .map(|v| v.decl_line)
            .collect()
    };
    let (j1, j2) = (line_of(VARS_C, "J1"), line_of(VARS_C, "J2"));
    assert_eq!(j_lines(fill), [Some(j1)].into());
    assert_eq!(j_lines(line_of(VARS_C, "READ")), [Some(j2)].into());
    assert_eq!(
        rbp_names(&f, "fill", line_of(VARS_C, "READ")),
        set(&["a", "j", "t"])
    );

    // Nothing at -O0 lives in a register across instructions.
    for ins in insns(&f, "sum_array") {
        for reg in [0, 1, 5, 17, 18] {
            assert_eq!(f.variable_in_register(ins.ip(), reg), None);
        }
    }
    // Outside any function.
    assert_eq!(f.stack_variable(0, RBP, -8), None);
    assert_eq!(f.variable_in_register(u64::MAX, 0), None);
}

#[test]
fn statics_and_globals() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        let f = open(&cc(dir.path(), "vars", VARS_C, &[opt, "-g"]));
        // `++calls` reads the static local through a rip-relative operand.
        let calls_addr = on_line(&f, "counter", line_of(VARS_C, "COUNTER"))
            .iter()
            .find(|ins| ins.is_ip_rel_memory_operand())
            .map(|ins| ins.ip_rel_memory_address())
            .expect("rip-relative access");
        let calls = f.global_variable(calls_addr).expect("calls");
        assert_eq!(calls.name, "calls", "{opt}");
        assert_eq!(calls.kind, VariableKind::Static);
        assert_eq!(calls.function.as_deref(), Some("counter"));
        assert_eq!((calls.offset, calls.size), (0, Some(4)));

        let table = f.symbol_address("g_table").expect("g_table");
        let t2 = f.global_variable(table + 8).expect("g_table[2]");
        assert_eq!((t2.name.as_str(), t2.offset), ("g_table", 8));
        assert_eq!(t2.function, None);
        assert_eq!(t2.to_string(), "g_table[2]");
        assert_ne!(
            name(&f.global_variable(table + 32)).unwrap_or(""),
            "g_table"
        );

        let grid = f.symbol_address("g_grid").expect("g_grid");
        let g = f.global_variable(grid + 4 * (5 + 4)).expect("g_grid[1][4]");
        assert_eq!(g.dims, vec![3, 5]);
        assert_eq!((g.size, g.elem_size), (Some(60), Some(4)));
        assert_eq!(g.element(), Some(vec![1, 4]));
        assert_eq!(g.to_string(), "g_grid[1][4]");

        let scale = f.symbol_address("g_scale").expect("g_scale");
        assert_eq!(name(&f.global_variable(scale)), Some("g_scale"));
        assert_eq!(f.global_variable(0), None);
    }
}

/// At -O2 (DWARF 5 location lists, gcc 12's default, and DWARF 4
/// `.debug_loc`), scalars live in registers.
#[test]
fn o2_registers() {
    let dir = tempfile::tempdir().unwrap();
    for version in ["-gdwarf-5", "-gdwarf-4"] {
        let f = open(&cc(dir.path(), "vars", VARS_C, &["-O2", version]));

        // `s += p[i]`: the loop's addsd accumulates into the register of `s`.
        let sum = line_of(VARS_C, "SUM");
        let addsd: Vec<Instruction> = on_line(&f, "sum_array", sum)
            .into_iter()
            .filter(|ins| ins.mnemonic() == Mnemonic::Addsd && ins.op0_kind() == OpKind::Register)
            .collect();
        assert!(!addsd.is_empty(), "{version}: no addsd on line {sum}");
        for ins in &addsd {
            let v = f.variable_in_register(ins.ip(), dwarf_of(ins.op0_register()));
            let v = v.unwrap_or_else(|| {
                panic!(
                    "{version}: nothing in {:?} at {:#x}",
                    ins.op0_register(),
                    ins.ip()
                )
            });
            assert_eq!(v.name, "s", "{version}");
            assert_eq!(
                (v.kind, v.offset, v.size),
                (VariableKind::Local, 0, Some(8))
            );
            assert_eq!(v.function.as_deref(), Some("sum_array"));
            assert_eq!(v.decl_line, Some(line_of(VARS_C, "S_DECL")));
            // It is not in the other xmm registers.
            let other = dwarf_of(ins.op0_register()) + 1;
            assert_ne!(name(&f.variable_in_register(ins.ip(), other)), Some("s"));
        }

        // `total += v[k] * 3`: some add on the line accumulates into the
        // register of `total`.
        let total = line_of(VARS_C, "TOTAL");
        let found = on_line(&f, "scaled_sum", total)
            .iter()
            .filter(|ins| ins.mnemonic() == Mnemonic::Add && ins.op0_kind() == OpKind::Register)
            .filter_map(|ins| {
                let reg = ins.op0_register().full_register();
                let v = f.variable_in_register(ins.ip(), dwarf_of(reg))?;
                Some((v, format!("{reg:?}").to_lowercase()))
            })
            .find(|(v, _)| v.name == "total");
        let (found, found_reg) =
            found.unwrap_or_else(|| panic!("{version}: no add into total's register"));
        assert_eq!(found.decl_line, Some(line_of(VARS_C, "TOTAL_DECL")));
        assert_eq!(found.size, Some(8));
        // `total = 0` zeroes that register: gcc's location range starts
        // after the writing instruction, so the writer's variable is asked
        // for at the following address.
        let reg = dwarf_register(&found_reg).unwrap();
        let zeroing: Vec<Instruction> = on_line(&f, "scaled_sum", line_of(VARS_C, "TOTAL_DECL"))
            .into_iter()
            .filter(|ins| {
                ins.op0_kind() == OpKind::Register
                    && dwarf_of(ins.op0_register().full_register()) == reg
            })
            .collect();
        assert!(
            !zeroing.is_empty(),
            "{version}: total's register is not set on its line"
        );
        // (One of them: on the `n <= 0` path the zero stays a constant.)
        assert!(
            zeroing
                .iter()
                .any(|ins| name(&f.variable_in_register(ins.next_ip(), reg)) == Some("total")),
            "{version}"
        );

        // `table[i] + table[i + 1]`: the parameters arrive in rdi and rsi
        // and stay there.
        let pick = line_of(VARS_C, "PICK");
        let load = on_line(&f, "pick", pick)
            .into_iter()
            .find(|ins| mem_operand(ins, Register::RDI).is_some())
            .expect("a load based on rdi");
        let table = f.variable_in_register(load.ip(), RDI).expect("table");
        assert_eq!(table.name, "table");
        assert_eq!((table.kind, table.size), (VariableKind::Parameter, Some(8)));
        assert_eq!(table.function.as_deref(), Some("pick"));
        let index = dwarf_of(load.memory_index().full_register());
        assert_eq!(name(&f.variable_in_register(load.ip(), index)), Some("i"));

        // `q.a * q.b`: the struct arrives in two registers
        // (`DW_OP_reg5; DW_OP_piece 8; DW_OP_reg4; DW_OP_piece 8`).
        let first = insns(&f, "mul_pair")[0];
        for (reg, offset) in [(RDI, 0), (RSI, 8)] {
            let q = f.variable_in_register(first.ip(), reg).expect("q");
            assert_eq!(q.name, "q", "{version}");
            assert_eq!(
                (q.kind, q.offset, q.size),
                (VariableKind::Parameter, offset, Some(16))
            );
        }
        assert_eq!(
            f.variable_in_register(first.ip(), RSI)
                .map(|q| q.to_string()),
            Some("q+8".to_string())
        );

        // `t += a[(j * 7) & 15]`: the array stays in the frame, addressed
        // from rsp (no frame pointer): the CFA rule relates the two.
        let (ins, disp) = load_of_a(&f);
        let a = f.stack_variable(ins.ip(), RSP, disp).expect("a");
        assert_eq!(a.name, "a", "{version}");
        assert_eq!((a.size, a.elem_size, a.offset), (Some(64), Some(4), 0));
        let a5 = f.stack_variable(ins.ip(), RSP, disp + 20).expect("a[5]");
        assert_eq!(a5.to_string(), "a[5]");
        assert_eq!(f.stack_variable(ins.ip(), RBP, disp), None);
    }
}

/// Variables of an inlined function: `y` of the always-inline `square`,
/// `volatile` so it has a frame slot, addressed from rsp inside `main`.
#[test]
fn inlined_variables() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(&cc(dir.path(), "inl", INLINE_C, &["-O2", "-g"]));
    let y_line = line_of_text(INLINE_C, "volatile int y = x;");
    let found: Vec<Variable> = insns(&f, "main")
        .iter()
        .filter_map(|ins| {
            let (base, disp) = mem_operand(ins, Register::RSP)?;
            f.stack_variable(ins.ip(), base, disp)
        })
        .collect();
    assert!(!found.is_empty(), "no rsp-based access named");
    for y in &found {
        assert_eq!(y.name, "y");
        assert_eq!(y.function.as_deref(), Some("square"));
        assert_eq!(y.decl_line, Some(y_line));
        assert_eq!((y.kind, y.size), (VariableKind::Local, Some(4)));
    }
    // `s += square(i)`: the sum of main is in the register an add writes.
    let s_line = line_of_text(INLINE_C, "s += square(i);");
    let s = insns(&f, "main")
        .iter()
        .filter(|ins| ins.mnemonic() == Mnemonic::Add && ins.op0_kind() == OpKind::Register)
        .filter(|ins| {
            f.frames(ins.ip())
                .last()
                .and_then(|fr| fr.location.as_ref())
                .is_some_and(|l| l.line == s_line)
        })
        .filter_map(|ins| {
            f.variable_in_register(ins.ip(), dwarf_of(ins.op0_register().full_register()))
        })
        .find(|v| v.name == "s");
    let s = s.expect("s in a register");
    assert_eq!(s.function.as_deref(), Some("main"));
}

/// A C89-style function inlined at -O2: its counters `i` and `j`, which gcc may leave out of
/// the inlined copy (no location there), are still among the locals of its code, with the
/// copy's pc ranges.
#[test]
fn locals_of_an_inlined_function() {
    const C89_C: &str = r#"#include <stdio.h>
static void kernel(int n, double a[40][40]) {
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            a[i][j] = a[i][j] * 0.5 + j;
}
int main(int argc, char **argv) {
    static double a[40][40];
    (void)argv;
    kernel(30 + argc, a);
    printf("%f\n", a[3][4]);
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let f = open(&cc(dir.path(), "c89", C89_C, &["-O2", "-g"]));
    let code = insns(&f, "main");
    let (lo, hi) = (code[0].ip(), code[code.len() - 1].next_ip());
    let locals = f.locals_within(lo, hi);
    for name in ["i", "j", "n", "a"] {
        let v = locals
            .iter()
            .find(|v| v.name == name && v.function.as_deref() == Some("kernel"))
            .unwrap_or_else(|| panic!("no `{name}` of kernel among {locals:?}"));
        assert!(!v.scope.is_empty(), "{v:?}");
        assert!(v.scope.iter().all(|&(b, e)| lo <= b && e <= hi), "{v:?}");
    }
    let i = locals.iter().find(|v| v.name == "i").unwrap();
    assert_eq!(i.decl_line, Some(line_of_text(C89_C, "int i, j;")));
}

fn line_of_text(src: &str, text: &str) -> u32 {
    let i = src.lines().position(|l| l.contains(text)).expect("line");
    u32::try_from(i + 1).unwrap()
}

/// DWARF in a separate file found through `.gnu_debuglink`; the CFA rules
/// come from the stripped file's own `.eh_frame`.
#[test]
fn separate_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "vars", VARS_C, &["-O2", "-g"]);
    let debug = dir.path().join("vars.debug");
    let run = |args: &[&std::ffi::OsStr]| -> bool {
        match Command::new("objcopy").args(args).status() {
            Ok(s) => s.success(),
            Err(_) => false,
        }
    };
    let os = |s: &Path| s.as_os_str().to_owned();
    if !run(&["--only-keep-debug".as_ref(), &os(&exe), &os(&debug)]) {
        eprintln!("objcopy unavailable: skipped");
        return;
    }
    let link = format!("--add-gnu-debuglink={}", debug.display());
    assert!(run(&["--strip-debug".as_ref(), link.as_ref(), &os(&exe)]));
    let f = open(&exe);
    assert!(f.has_debug_info());
    let (ins, disp) = load_of_a(&f);
    let a = f.stack_variable(ins.ip(), RSP, disp).expect("a");
    assert_eq!((a.name.as_str(), a.offset), ("a", 0));
    let pick = on_line(&f, "pick", line_of(VARS_C, "PICK"));
    let load = pick
        .iter()
        .find(|ins| mem_operand(ins, Register::RDI).is_some())
        .expect("a load based on rdi");
    assert_eq!(name(&f.variable_in_register(load.ip(), RDI)), Some("table"));
}

/// Without DWARF, with DWARF stripped, or with junk DWARF: `None`, no panic.
#[test]
fn no_or_bad_debug_info() {
    let dir = tempfile::tempdir().unwrap();
    let plain = cc(dir.path(), "plain", VARS_C, &["-O2"]);
    let stripped = cc(dir.path(), "stripped", VARS_C, &["-O0", "-g", "-s"]);
    let with_debug = cc(dir.path(), "dbg", VARS_C, &["-O2", "-g"]);
    // Junk over the variable-related sections of a real binary.
    let sections = [
        ".debug_info",
        ".debug_loclists",
        ".debug_abbrev",
        ".eh_frame",
    ];
    let junk = junk_copy(&with_debug, &sections);

    for path in [&plain, &stripped, &junk] {
        let f = open(path);
        let mut pcs: Vec<u64> = f.section_range(".text").unwrap().step_by(3).collect();
        pcs.push(0);
        for pc in pcs {
            assert_eq!(f.variable_in_register(pc, 0), None);
            assert_eq!(f.variable_in_register(pc, 17), None);
            assert_eq!(f.stack_variable(pc, RSP, -8), None);
            assert_eq!(f.stack_variable(pc, RBP, -8), None);
        }
        for addr in [0, f.symbol_address("g_table").unwrap_or(0)] {
            assert_eq!(f.global_variable(addr), None);
        }
    }
}

#[test]
fn dwarf_register_of_iced_names() {
    assert_eq!(dwarf_of(Register::RDI), RDI);
    assert_eq!(dwarf_of(Register::XMM3), 20);
    assert_eq!(dwarf_of(Register::R12D), 12);
}

const VARS_CPP: &str = r#"namespace ns {
struct Acc {
    static long total;
    long add(long x) {
        long y = x * 2; /* Y */
        total += y;
        return total;
    }
};
long Acc::total = 0;
}

int main(int argc, char **) {
    ns::Acc a;
    return (int)a.add(argc);
}
"#;

/// C++: names come through `DW_AT_specification` (the static member's
/// definition) and functions are named by their demangled linkage names,
/// as [`ElfFile::frames`] names them.
#[test]
fn cpp_names() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = super::compile("g++", dir.path(), "acc", ".cpp", VARS_CPP, &["-O0", "-g"])
    else {
        eprintln!("g++ not installed: skipping the C++ assertions");
        return;
    };
    let f = open(&exe);
    let add = f.symbol_address("ns::Acc::add(long)").expect("add");
    let y_line = line_of(VARS_CPP, "Y");
    let vars: Vec<Variable> = insns(&f, "ns::Acc::add(long)")
        .iter()
        .filter(|ins| f.location(ins.ip()).is_some_and(|l| l.line == y_line))
        .filter_map(|ins| {
            let (base, disp) = mem_operand(ins, Register::RBP)?;
            f.stack_variable(ins.ip(), base, disp)
        })
        .collect();
    let names: BTreeSet<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["x", "y"].into(), "{vars:?}");
    let frame = f.frames(add + 8)[0].function.clone();
    for v in &vars {
        assert_eq!(v.function, frame);
        assert_eq!(v.function.as_deref(), Some("ns::Acc::add(long)"));
    }
    let total = f
        .symbol_address("_ZN2ns3Acc5totalE")
        .expect("ns::Acc::total");
    let t = f.global_variable(total).expect("total");
    assert_eq!(
        (t.name.as_str(), t.kind, t.size),
        ("total", VariableKind::Static, Some(8))
    );
}
