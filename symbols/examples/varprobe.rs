use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let f = symbols::ElfFile::open(std::path::Path::new(&path)).unwrap();
    println!("open {:?} debug={}", t.elapsed(), f.has_debug_info());
    let funcs: Vec<_> = f
        .functions()
        .iter()
        .filter(|s| s.size > 16)
        .cloned()
        .collect();
    let t = Instant::now();
    let mut hits = 0;
    let mut n = 0;
    for (k, s) in funcs
        .iter()
        .enumerate()
        .step_by((funcs.len() / 2000).max(1))
    {
        for off in (0..s.size).step_by(7).take(20) {
            let pc = s.address + off;
            for reg in [0u16, 1, 3, 5, 6, 12, 17] {
                n += 1;
                if f.variable_in_register(pc, reg).is_some() {
                    hits += 1;
                }
            }
            for d in [-8i64, -16, 8, 0x10] {
                n += 1;
                if f.stack_variable(pc, 7, d).is_some() {
                    hits += 1;
                }
            }
        }
        if k == 0 {
            println!("first query done {:?}", t.elapsed());
        }
    }
    println!("{n} queries, {hits} hits, {:?}", t.elapsed());
    let t = Instant::now();
    let g = f.global_variable(
        f.sections()
            .iter()
            .find(|s| s.name == ".data")
            .map(|s| s.address + 16)
            .unwrap_or(0),
    );
    println!("global {:?} {:?}", g.map(|v| v.name), t.elapsed());
}
