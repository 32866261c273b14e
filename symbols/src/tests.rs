//! Unit tests: small C/C++ programs are compiled with the system compiler
//! into a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

use crate::*;

mod vars;

/// Line of `int compute(int x) {` in [`PROG_C`] (1-based).
const COMPUTE_LINE: u32 = 5;

const PROG_C: &str = r#"#include <stdio.h>

static int helper(int x) { return x * 3; }

int compute(int x) {
    return helper(x) + 1;
}

int main(int argc, char **argv) {
    (void)argv;
    puts("hi");
    printf("%d\n", compute(argc));
    return 0;
}
"#;

/// At -O2, `square` is inlined into `main`.
const INLINE_C: &str = r#"#include <stdio.h>

static inline __attribute__((always_inline)) int square(int x) {
    volatile int y = x;
    return y * y;
}

int main(int argc, char **argv) {
    (void)argv;
    int s = 0;
    for (int i = 0; i < argc + 10; i++)
        s += square(i);
    printf("%d\n", s);
    return 0;
}
"#;

/// Prints the runtime address of `main` and `puts`, then its own maps.
const SELFMAPS_C: &str = r#"#include <stdio.h>

int main(void) {
    printf("main %p\n", (void *)main);
    printf("puts %p\n", (void *)puts);
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    fclose(f);
    return 0;
}
"#;

const PROG_CPP: &str = r#"namespace ns {
int twice(int x) { return 2 * x; }
}

int main(int argc, char **) { return ns::twice(argc); }
"#;

/// Compile `src` (written as `name` + `ext`) into `dir/name` with extra
/// `args`. `None` when `compiler` is not installed.
fn compile(
    compiler: &str,
    dir: &Path,
    name: &str,
    ext: &str,
    src: &str,
    args: &[&str],
) -> Option<PathBuf> {
    let src_path = dir.join(format!("{name}{ext}"));
    std::fs::write(&src_path, src).expect("write source");
    let out = dir.join(name);
    let status = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(&src_path)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("{compiler} {args:?} failed: {s}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("cannot run {compiler}: {e}"),
    }
}

fn cc(dir: &Path, name: &str, src: &str, args: &[&str]) -> PathBuf {
    compile("cc", dir, name, ".c", src, args).expect("a C compiler (cc) is required")
}

fn open(path: &Path) -> ElfFile {
    ElfFile::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// The instructions of function `name`, decoded from the file.
fn insns(file: &ElfFile, name: &str) -> Vec<Instruction> {
    let start = file.symbol_address(name).expect("function");
    let f = file.function_at(start).expect("function symbol");
    let data = std::fs::read(file.path()).expect("read");
    let seg = file
        .segments()
        .iter()
        .find(|s| s.range().contains(&start))
        .expect("segment");
    let off = (start - seg.vaddr + seg.offset) as usize;
    let bytes = &data[off..off + f.size as usize];
    Decoder::with_ip(64, bytes, start, DecoderOptions::NONE)
        .into_iter()
        .collect()
}

/// Direct call targets and `call [rip+disp]` GOT slots in function `name`.
fn calls_in(file: &ElfFile, name: &str) -> (Vec<u64>, Vec<u64>) {
    let mut direct = Vec::new();
    let mut got = Vec::new();
    for ins in insns(file, name) {
        if ins.mnemonic() != Mnemonic::Call {
            continue;
        }
        match ins.op0_kind() {
            OpKind::NearBranch64 => direct.push(ins.near_branch64()),
            OpKind::Memory if ins.is_ip_rel_memory_operand() => {
                got.push(ins.ip_rel_memory_address())
            }
            _ => {}
        }
    }
    (direct, got)
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn types_are_send_sync() {
    assert_send_sync::<ElfFile>();
    assert_send_sync::<Symbolizer>();
}

#[test]
fn pie_symbols_locations() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-g", "-pie", "-fPIE"]);
    let f = open(&exe);
    assert!(f.is_pie());
    assert!(f.has_symtab());
    assert!(f.has_debug_info());
    assert_eq!(f.path(), exe);
    let main = f.symbol_address("main").expect("main");
    let text = f.section_range(".text").expect(".text");
    assert!(text.contains(&main), "{main:#x} not in {text:x?}");
    assert!(text.contains(&f.entry()));
    assert_eq!(
        f.function_at(main + 3).map(|s| s.name.as_str()),
        Some("main")
    );
    assert_eq!(f.describe(main), "main");
    assert_eq!(f.describe(main + 0x1a), "main+0x1a");
    assert_eq!(f.describe(0xdead_0000_0000), "0xdead00000000");
    assert!(f.function_at(0).is_none());
    // Static functions come from .symtab.
    let helper = f.symbol_address("helper").expect("helper");
    assert_eq!(f.describe(helper + 1), "helper+0x1");

    let compute = f.symbol_address("compute").expect("compute");
    let loc = f.location(compute).expect("location of compute");
    assert!(loc.file.ends_with("/prog.c"), "{loc}");
    assert!(Path::new(&loc.file).is_absolute(), "{loc}");
    assert_eq!(loc.line, COMPUTE_LINE, "{loc}");
    // Cached second lookup agrees.
    assert_eq!(f.location(compute), Some(loc.clone()));
    let frames = f.frames(compute);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].function.as_deref(), Some("compute"));
    assert_eq!(
        frames[0].location.as_ref().map(|l| l.line),
        Some(COMPUTE_LINE)
    );
    let main_loc = f.location(main).expect("location of main");
    assert!(
        main_loc.line > COMPUTE_LINE && main_loc.line < 20,
        "{main_loc}"
    );

    // Lowest PT_LOAD of a PIE is at 0.
    assert_eq!(f.min_load_vaddr(), 0);
    assert!(f.segments().iter().any(|s| s.is_exec()));
}

#[test]
fn non_pie() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "prog",
        PROG_C,
        &["-O0", "-g", "-no-pie", "-fno-pie"],
    );
    let f = open(&exe);
    assert!(!f.is_pie());
    let main = f.symbol_address("main").expect("main");
    assert!(main >= 0x400000, "{main:#x}");
    assert!(f.section_range(".text").unwrap().contains(&main));
    assert_eq!(f.function_at(main + 3).unwrap().name, "main");
    assert!(f.min_load_vaddr() >= 0x400000);
    assert_eq!(f.load_bias(&[], &exe), Some(0));
    let compute = f.symbol_address("compute").unwrap();
    assert_eq!(f.location(compute).map(|l| l.line), Some(COMPUTE_LINE));
}

#[test]
fn stripped() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-s"]);
    let f = open(&exe);
    assert!(!f.has_symtab());
    assert!(!f.has_debug_info());
    assert_eq!(f.symbol_address("main"), None);
    // Imports still work from .dynsym.
    assert!(f.plt_stubs().iter().any(|s| s.name == "puts"));
    let entry = f.entry();
    let d = f.describe(entry);
    match f.function_at(entry) {
        Some(sym) => assert!(d.starts_with(&sym.name), "{d}"),
        None => assert_eq!(d, format!("{entry:#x}")),
    }
    assert_eq!(f.location(entry), None);
    assert!(f.frames(entry).iter().all(|fr| fr.location.is_none()));
    // A PLT stub is described by its import.
    let stub = f.plt_stubs().iter().find(|s| s.name == "puts").unwrap();
    assert_eq!(f.describe(stub.start), "puts@plt");
}

/// Every direct call from `main` into a PLT stub has a name, and `puts` is
/// among them.
fn check_plt_calls(f: &ElfFile) {
    let (direct, _) = calls_in(f, "main");
    let names: Vec<&str> = direct
        .iter()
        .filter_map(|&t| f.import_for_plt_stub(t))
        .collect();
    assert!(names.contains(&"puts"), "{names:?} {:x?}", f.plt_stubs());
    assert!(names.contains(&"printf"), "{names:?}");
    // The stub's GOT slot is the import's slot.
    let stub = f.plt_stubs().iter().find(|s| s.name == "puts").unwrap();
    assert_eq!(f.import_for_got_slot(stub.got_slot), Some("puts"));
    assert_eq!(f.import_for_plt_stub(stub.start + 1), Some("puts"));
    assert_eq!(f.describe(stub.start), "puts@plt");
    // Link-time addresses outside any stub have none.
    assert_eq!(
        f.import_for_plt_stub(f.symbol_address("main").unwrap()),
        None
    );
}

#[test]
fn plt_lazy() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-fcf-protection=none"]);
    let f = open(&exe);
    check_plt_calls(&f);
    // PLT0 has no name.
    let plt = f.section_range(".plt").expect(".plt");
    assert_eq!(f.import_for_plt_stub(plt.start), None);
}

#[test]
fn plt_ibt_plt_sec() {
    let dir = tempfile::tempdir().unwrap();
    // Debian's crt files lack the IBT property: ask ld for IBT PLTs.
    let args = ["-O0", "-fcf-protection=full", "-Wl,-z,ibtplt"];
    let f = open(&cc(dir.path(), "prog", PROG_C, &args));
    assert!(f.section_range(".plt.sec").is_some());
    check_plt_calls(&f);
    // Lazy `.plt` entries (`endbr64; push N; jmp PLT0`) have no name.
    let plt = f.section_range(".plt").unwrap();
    assert!((plt.start..plt.end).all(|a| f.import_for_plt_stub(a).is_none()));
    let mut args = args.to_vec();
    args.push("-no-pie");
    check_plt_calls(&open(&cc(dir.path(), "prog_nopie", PROG_C, &args)));
}

#[test]
fn plt_bind_now() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-Wl,-z,now"]);
    let f = open(&exe);
    check_plt_calls(&f);
    let exe = cc(
        dir.path(),
        "prog_ibt",
        PROG_C,
        &["-O0", "-Wl,-z,now", "-fcf-protection=full", "-Wl,-z,ibtplt"],
    );
    check_plt_calls(&open(&exe));
}

#[test]
fn no_plt_got_calls() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-fno-plt"]);
    let f = open(&exe);
    let (_, slots) = calls_in(&f, "main");
    let names: Vec<&str> = slots
        .iter()
        .filter_map(|&s| f.import_for_got_slot(s))
        .collect();
    assert!(names.contains(&"puts"), "{names:?}");
    assert!(names.contains(&"printf"), "{names:?}");
}

#[test]
fn inlined_frames() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "inl", INLINE_C, &["-O2", "-g"]);
    let f = open(&exe);
    let main = f.symbol_address("main").expect("main");
    let end = main + f.function_at(main).unwrap().size;
    let found = (main..end).map(|a| f.frames(a)).find(|fr| fr.len() >= 2);
    let frames = found.expect("an address with an inlined frame");
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0].function.as_deref(), Some("square"));
    assert_eq!(frames[1].function.as_deref(), Some("main"));
    let inner = frames[0].location.as_ref().expect("inner location");
    assert!(inner.file.ends_with("inl.c"));
    assert!((4..=5).contains(&inner.line), "{inner}");
    let call_site = frames[1].location.as_ref().expect("call site");
    assert_eq!(call_site.line, 12, "{call_site}");
}

#[test]
fn cpp_demangling() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile("g++", dir.path(), "cpp", ".cpp", PROG_CPP, &["-O0", "-g"]) else {
        eprintln!("g++ not installed: skipping the C++ assertions");
        return;
    };
    let f = open(&exe);
    let addr = f.symbol_address("ns::twice(int)").expect("demangled name");
    assert_eq!(f.symbol_address("_Z5twicei"), None);
    assert_eq!(f.symbol_address("_ZN2ns5twiceEi"), Some(addr));
    assert_eq!(f.describe(addr + 1), "ns::twice(int)+0x1");
    let frames = f.frames(addr);
    let name = frames[0].function.as_deref().unwrap_or_default();
    assert!(name.contains("ns::twice"), "{frames:?}");
}

#[test]
fn demangle_names() {
    assert_eq!(demangle("main"), "main");
    assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
    assert_eq!(demangle("_ZN2ns5twiceEi"), "ns::twice(int)");
    assert_eq!(
        demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    // A legacy name whose components hold `..` (`::` of a trait path).
    assert_eq!(
        demangle("_ZN75_$LT$usize$u20$as$u20$core..slice..index..SliceIndex$LT$$u5b$T$u5d$$GT$$GT$9index_mut17h56730c45bbe35a52E"),
        "<usize as core::slice::index::SliceIndex<[T]>>::index_mut"
    );
    assert_eq!(
        demangle("_RNvNtCs1234_7mycrate3foo3bar"),
        "mycrate::foo::bar"
    );
    assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
}

#[test]
fn not_elf_and_wrong_machine() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text");
    std::fs::write(&text, "#!/bin/sh\necho hi\n").unwrap();
    assert!(matches!(ElfFile::open(&text), Err(Error::NotElf { .. })));
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    assert!(matches!(ElfFile::open(&empty), Err(Error::NotElf { .. })));
    assert!(matches!(
        ElfFile::open(&dir.path().join("missing")),
        Err(Error::Io { .. })
    ));
    assert!(ElfFile::open(dir.path()).is_err());

    let mut hdr = vec![0u8; 64];
    hdr[..4].copy_from_slice(b"\x7fELF");
    hdr[4] = 2; // 64-bit
    hdr[5] = 1; // little endian
    hdr[6] = 1;
    hdr[18..20].copy_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    let arm = dir.path().join("arm");
    std::fs::write(&arm, &hdr).unwrap();
    match ElfFile::open(&arm) {
        Err(e @ Error::NotX86_64 { .. }) => {
            assert!(e.to_string().contains("aarch64"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // Truncated / garbage x86-64 header: a parse error, not a panic.
    hdr[18..20].copy_from_slice(&62u16.to_le_bytes());
    hdr[32..40].copy_from_slice(&0xffff_ffffu64.to_le_bytes()); // e_phoff
    hdr[54..56].copy_from_slice(&56u16.to_le_bytes());
    hdr[56..58].copy_from_slice(&3u16.to_le_bytes()); // e_phnum
    let bad = dir.path().join("bad");
    std::fs::write(&bad, &hdr).unwrap();
    assert!(matches!(ElfFile::open(&bad), Err(Error::Parse { .. })));
}

#[test]
fn garbage_dwarf_is_none() {
    // A copy of a real binary whose .debug_info / .debug_line contents are
    // overwritten with junk.
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-g"]);
    let junk = junk_copy(&exe, &[".debug_info", ".debug_line", ".debug_abbrev"]);
    let f = open(&junk);
    let compute = f.symbol_address("compute").unwrap();
    for a in compute..compute + 16 {
        let _ = f.location(a);
        let _ = f.frames(a);
    }
    assert_eq!(f.describe(compute), "compute");
}

const SAMPLE_MAPS: &str = "\
555555554000-555555555000 r--p 00000000 08:01 1234567                    /usr/bin/my prog
555555555000-555555556000 r-xp 00001000 08:01 1234567                    /usr/bin/my prog
555555558000-555555559000 rw-p 00003000 08:01 1234567                    /usr/bin/my prog
555555559000-55555557a000 rw-p 00000000 00:00 0                          [heap]
7ffff7dd3000-7ffff7df9000 r--p 00000000 08:01 2345678                    /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7df9000-7ffff7f4e000 r-xp 00026000 08:01 2345678                    /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7fa0000-7ffff7fa3000 rw-p 00000000 00:00 0 
7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                          [vdso]
7ffff7fc5000-7ffff7fc6000 rw-p 00000000 08:01 99                         /tmp/gone (deleted)
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage line
";

#[test]
fn parse_maps_sample() {
    let maps = parse_proc_maps(SAMPLE_MAPS);
    assert_eq!(maps.len(), 11);
    let m = &maps[1];
    assert_eq!(m.start, 0x555555555000);
    assert_eq!(m.end, 0x555555556000);
    assert_eq!(&m.perms, b"r-xp");
    assert!(m.is_read() && m.is_exec() && !m.is_write());
    assert_eq!(m.perms_str(), "r-xp");
    assert_eq!(m.offset, 0x1000);
    assert_eq!(m.inode, 1234567);
    assert_eq!(m.path.as_deref(), Some(Path::new("/usr/bin/my prog")));
    assert!(m.is_file());
    assert_eq!(maps[3].path.as_deref(), Some(Path::new("[heap]")));
    assert!(!maps[3].is_file());
    assert_eq!(maps[6].path, None);
    assert_eq!(maps[5].offset, 0x26000);
    assert_eq!(
        maps[8].path.as_deref(),
        Some(Path::new("/tmp/gone (deleted)"))
    );
    assert_eq!(maps[10].start, 0xffffffffff600000);
    assert!(parse_proc_maps("").is_empty());
}

/// Synthetic mappings of `f` at `base` (its PT_LOADs, page-aligned).
fn synthetic_maps(f: &ElfFile, path: &Path, bias: u64) -> Vec<Mapping> {
    f.segments()
        .iter()
        .map(|s| Mapping {
            start: bias + (s.vaddr & !0xfff),
            end: bias + ((s.vaddr + s.memsz + 0xfff) & !0xfff),
            perms: if s.is_exec() { *b"r-xp" } else { *b"r--p" },
            offset: s.offset & !0xfff,
            inode: 1,
            path: Some(path.to_path_buf()),
        })
        .collect()
}

#[test]
fn load_bias_synthetic() {
    let dir = tempfile::tempdir().unwrap();
    let pie = open(&cc(
        dir.path(),
        "pie",
        PROG_C,
        &["-O0", "-g", "-pie", "-fPIE"],
    ));
    let bias = 0x5555_5555_4000;
    let fake_path = Path::new("/opt/app/pie");
    let mut maps = synthetic_maps(&pie, fake_path, bias);
    assert_eq!(pie.load_bias(&maps, fake_path), Some(bias));
    // Order of mappings and unrelated files do not matter.
    maps.reverse();
    maps.push(Mapping {
        start: 0x1000,
        end: 0x2000,
        perms: *b"r--p",
        offset: 0,
        inode: 2,
        path: Some(PathBuf::from("/opt/app/other")),
    });
    assert_eq!(pie.load_bias(&maps, fake_path), Some(bias));
    // Only the executable mapping (offset != 0) is enough.
    let exec_only: Vec<Mapping> = maps
        .iter()
        .filter(|m| m.is_exec() && m.path.as_deref() == Some(fake_path))
        .cloned()
        .collect();
    assert_eq!(pie.load_bias(&exec_only, fake_path), Some(bias));
    assert_eq!(pie.load_bias(&maps, Path::new("/nowhere")), None);
    // Matching by canonical path when the path in the maps differs.
    let real = synthetic_maps(&pie, pie.canonical_path().unwrap(), bias);
    assert_eq!(pie.load_bias(&real, Path::new("/nowhere")), Some(bias));

    let non_pie = open(&cc(
        dir.path(),
        "nopie",
        PROG_C,
        &["-O0", "-no-pie", "-fno-pie"],
    ));
    let maps = synthetic_maps(&non_pie, fake_path, 0);
    assert_eq!(non_pie.load_bias(&maps, fake_path), Some(0));
    assert_eq!(non_pie.load_bias(&[], fake_path), Some(0));
}

#[test]
fn symbolizer_synthetic() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pie", PROG_C, &["-O0", "-g", "-pie", "-fPIE"]);
    let f = open(&exe);
    let main = f.symbol_address("main").unwrap();
    let compute = f.symbol_address("compute").unwrap();
    let puts_stub = f
        .plt_stubs()
        .iter()
        .find(|s| s.name == "puts")
        .unwrap()
        .start;
    let bias = 0x5555_5555_4000;
    let maps = synthetic_maps(&f, &exe, bias);
    let s = Symbolizer::new(f, maps.clone());
    assert_eq!(s.main_bias(), Some(bias));
    let r = s.resolve(bias + main + 2).unwrap();
    assert_eq!(r.link_addr, main + 2);
    assert_eq!(r.bias, bias);
    assert_eq!(s.describe(bias + main + 2), "main+0x2");
    assert_eq!(
        s.location(bias + compute).map(|l| l.line),
        Some(COMPUTE_LINE)
    );
    assert_eq!(
        s.frames(bias + compute)[0].function.as_deref(),
        Some("compute")
    );
    assert_eq!(s.import_for_plt_stub(bias + puts_stub), Some("puts"));
    assert_eq!(s.describe(0x10), "0x10");
    assert!(s.resolve(0x10).is_none());
    assert!(s.mapping_at(bias + main).is_some());

    // After a refresh with the executable moved, the new bias applies.
    let mut s = s;
    let bias2 = 0x5600_0000_0000;
    let maps2 = synthetic_maps(s.main(), &exe, bias2);
    s.refresh(maps2);
    assert_eq!(s.main_bias(), Some(bias2));
    assert_eq!(s.describe(bias2 + main), "main");
    assert!(s.resolve(bias + main).is_none());
}

#[test]
fn symbolizer_real_process() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "selfmaps", SELFMAPS_C, &["-O0", "-g"]);
    let out = Command::new(&exe).output().expect("run selfmaps");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let addr_of = |key: &str| -> u64 {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .expect("address line");
        u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).unwrap()
    };
    let main_rt = addr_of("main ");
    let puts_rt = addr_of("puts ");
    let maps = parse_proc_maps(&text);
    assert!(maps
        .iter()
        .any(|m| m.path.as_deref() == Some(Path::new("[stack]"))));

    let f = open(&exe);
    let main = f.symbol_address("main").unwrap();
    let bias = f
        .load_bias(&maps, &std::fs::canonicalize(&exe).unwrap())
        .expect("bias");
    assert_eq!(bias + main, main_rt);

    let s = Symbolizer::new(f, maps);
    assert_eq!(s.main_bias(), Some(bias));
    assert_eq!(s.describe(main_rt), "main");
    assert!(s.location(main_rt).is_some());
    // `puts` resolves into libc, opened lazily.
    let r = s.resolve(puts_rt).expect("libc mapped");
    assert!(
        r.file.path().to_string_lossy().contains("libc"),
        "{:?}",
        r.file
    );
    let d = s.describe(puts_rt);
    assert!(d.contains("puts"), "{d}");
}

#[test]
fn compressed_debug_sections() {
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "prog", PROG_C, &["-O0", "-g", "-gz=zlib"]);
    let f = open(&exe);
    assert!(f.has_debug_info());
    let compute = f.symbol_address("compute").unwrap();
    assert_eq!(f.location(compute).map(|l| l.line), Some(COMPUTE_LINE));
}

const LIB_C: &str = r#"#include <stdio.h>

int libfunc(int x) {
    puts("lib");
    return x + 1;
}
"#;

#[test]
fn shared_library() {
    let dir = tempfile::tempdir().unwrap();
    let lib = cc(
        dir.path(),
        "libt.so",
        LIB_C,
        &["-O0", "-g", "-shared", "-fPIC"],
    );
    let f = open(&lib);
    assert!(f.is_pie());
    let addr = f.symbol_address("libfunc").expect("libfunc");
    assert_eq!(f.describe(addr + 4), "libfunc+0x4");
    assert_eq!(f.location(addr).map(|l| l.line), Some(3));
    assert!(f.plt_stubs().iter().any(|s| s.name == "puts"));
    let bias = 0x7fff_f000_0000;
    let maps = synthetic_maps(&f, &lib, bias);
    assert_eq!(f.load_bias(&maps, &lib), Some(bias));
    // Stripped, the exported function is still known from .dynsym.
    let stripped = cc(
        dir.path(),
        "libs.so",
        LIB_C,
        &["-O0", "-shared", "-fPIC", "-s"],
    );
    let f = open(&stripped);
    assert!(!f.has_symtab());
    let addr = f.symbol_address("libfunc").expect("libfunc in .dynsym");
    assert_eq!(f.describe(addr + 1), "libfunc+0x1");
}

fn run_tool(tool: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(tool)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    assert!(status.success(), "{tool} {args:?} failed: {status}");
}

/// A stripped binary whose symbols and DWARF live in a separate debug file under a debug root,
/// at `.build-id/xx/yyyy.debug` (as Debian's `-dbgsym` packages install them), is named and
/// located as the unstripped one; with another root it is not.
#[test]
fn separate_debug_file_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "prog", PROG_C, &["-O0", "-g", "-Wl,--build-id"]);
    let full = open(&prog);
    let id = full.build_id().expect("cc -Wl,--build-id wrote a build-id");
    let compute = full.symbol_address("compute").expect("compute");
    let root = dir.path().join("debug");
    let debug = root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    run_tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            prog.as_os_str(),
            debug.as_os_str(),
        ],
    );
    run_tool("objcopy", &["--strip-all".as_ref(), prog.as_os_str()]);

    let elsewhere = OpenOptions {
        debug_root: dir.path().join("nothing-here"),
        debug_file: None,
    };
    let stripped = ElfFile::open_with(&prog, &elsewhere).unwrap();
    assert!(!stripped.has_symtab());
    assert!(!stripped.has_debug_info());
    assert_eq!(stripped.symbol_address("compute"), None);
    assert_eq!(stripped.debug_file(), None);

    let opts = OpenOptions {
        debug_root: root.clone(),
        debug_file: None,
    };
    let f = ElfFile::open_with(&prog, &opts).unwrap();
    assert_eq!(f.build_id().as_deref(), Some(id.as_str()));
    assert_eq!(f.debug_file(), Some(debug.as_path()));
    assert!(f.has_symtab());
    assert!(f.has_debug_info());
    assert_eq!(f.symbol_address("compute"), Some(compute));
    assert_eq!(f.describe(compute + 1), "compute+0x1");
    assert_eq!(f.location(compute).map(|l| l.line), Some(COMPUTE_LINE));
    // The same file given explicitly (a copy kept with a recording).
    let copy = dir.path().join("kept.debug");
    std::fs::copy(&debug, &copy).unwrap();
    let given = OpenOptions {
        debug_root: dir.path().join("nothing-here"),
        debug_file: Some(copy.clone()),
    };
    let f = ElfFile::open_with(&prog, &given).unwrap();
    assert_eq!(f.debug_file(), Some(copy.as_path()));
    assert_eq!(f.symbol_address("compute"), Some(compute));
    // The bytes of the code are the file's.
    let bytes = f.bytes_at(compute, 4).expect("code bytes");
    assert_eq!(bytes.len(), 4);
    assert_eq!(full.bytes_at(compute, 4), Some(bytes));
}

/// A copy of binary `exe` (beside it, named `junk`) whose `sections` hold junk.
fn junk_copy(exe: &Path, sections: &[&str]) -> PathBuf {
    let mut data = std::fs::read(exe).unwrap();
    let ranges: Vec<(u64, u64)> = {
        use object::{Object, ObjectSection};
        let file = object::File::parse(&*data).unwrap();
        sections
            .iter()
            .filter_map(|n| file.section_by_name(n)?.file_range())
            .collect()
    };
    for (off, size) in ranges {
        for (i, b) in data[off as usize..(off + size) as usize]
            .iter_mut()
            .enumerate()
        {
            *b = (i as u8).wrapping_mul(37).wrapping_add(0x91);
        }
    }
    let junk = exe.with_file_name("junk");
    std::fs::write(&junk, &data).unwrap();
    junk
}
