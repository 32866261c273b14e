//! Print what `symbols` knows about an ELF file:
//! `cargo run -p symbols --example elfinfo -- FILE [ADDR…]` (addresses in
//! hex, link-time).

use std::path::Path;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: elfinfo FILE [ADDR...]");
        std::process::exit(2);
    };
    let f = match symbols::ElfFile::open(Path::new(&path)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!(
        "pie={} entry={:#x} symtab={} debug={} min_vaddr={:#x} functions={}",
        f.is_pie(),
        f.entry(),
        f.has_symtab(),
        f.has_debug_info(),
        f.min_load_vaddr(),
        f.functions().len()
    );
    for s in f.plt_stubs() {
        println!(
            "plt {:#x}..{:#x} got={:#x} {}",
            s.start, s.end, s.got_slot, s.name
        );
    }
    let mut got: Vec<_> = f.got_imports().iter().collect();
    got.sort();
    for (slot, name) in got {
        println!("got {slot:#x} {name}");
    }
    for a in args {
        let Ok(addr) = u64::from_str_radix(a.trim_start_matches("0x"), 16) else {
            eprintln!("bad address {a}");
            continue;
        };
        println!("{addr:#x}: {}", f.describe(addr));
        if let Some(loc) = f.location(addr) {
            println!("  at {loc}");
        }
        for fr in f.frames(addr) {
            let loc = fr.location.map(|l| l.to_string()).unwrap_or_default();
            println!("  frame {} {loc}", fr.function.unwrap_or_default());
        }
    }
}
