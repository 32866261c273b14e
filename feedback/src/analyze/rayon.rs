//! Parallel and vector advice in Rust's own words: a parallel loop becomes a rayon iterator
//! written from the loop's `for` statement (`(0..n).into_par_iter().for_each(|i| ...)`), the
//! arrays its iterations write in chunks of their own split with `par_chunks_mut` (a closure
//! cannot write through a shared `&mut`), reductions as `.sum()` / `.reduce(..)`, and
//! privatized variables as the closure's own `let`s. Rust has no vectorization directive.

use super::text::{after_phrase, fp_note, split_reductions};
use crate::input::{Access, Region};
use crate::legality::{Change, Requirement};
use crate::ReduceOp;

/// The `for` statement of a loop: its pattern (`i`) and what it iterates (`0..n`).
struct For<'a> {
    pattern: &'a str,
    iterable: &'a str,
}

/// Reads `for i in 0..n {` (a label before it allowed); `None` for anything else (`while`,
/// `loop`, an iterator chain).
fn parse_for(header: &str) -> Option<For<'_>> {
    let h = header.trim();
    let h = match h.split_once(':') {
        Some((label, rest)) if label.starts_with('\'') => rest.trim_start(),
        _ => h,
    };
    let rest = h.strip_prefix("for ")?;
    let (pattern, iterable) = rest.split_once(" in ")?;
    let iterable = iterable.trim_end().trim_end_matches('{').trim_end();
    (!pattern.trim().is_empty() && !iterable.is_empty()).then(|| For {
        pattern: pattern.trim(),
        iterable,
    })
}

/// `iterable` as a rayon parallel iterator: `(0..n).into_par_iter()`, `v.par_iter()`,
/// `v.par_chunks_mut(k)`. The order of a parallel loop's iterations is not kept: `.rev()`
/// goes.
fn par_iter(iterable: &str) -> String {
    let e = iterable.replace(".rev()", "");
    for (seq, par) in [
        (".iter_mut()", ".par_iter_mut()"),
        (".iter()", ".par_iter()"),
        (".into_iter()", ".into_par_iter()"),
        (".chunks_mut(", ".par_chunks_mut("),
        (".chunks_exact_mut(", ".par_chunks_exact_mut("),
        (".chunks(", ".par_chunks("),
        (".chunks_exact(", ".par_chunks_exact("),
    ] {
        if e.contains(seq) {
            return e.replacen(seq, par, 1);
        }
    }
    if let Some(v) = e.strip_prefix("&mut ") {
        return format!("{}.par_iter_mut()", v.trim());
    }
    if let Some(v) = e.strip_prefix('&') {
        return format!("{}.par_iter()", v.trim());
    }
    // `(0..n).step_by(2)`: the parallel iterator goes after the parenthesized range.
    if e.starts_with('(') {
        if let Some(close) = crate::scopes::matching_paren(&e) {
            return format!("{}.into_par_iter(){}", &e[..=close], &e[close + 1..]);
        }
    }
    if e.chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && !e.contains("..")
    {
        format!("{e}.into_par_iter()")
    } else {
        format!("({e}).into_par_iter()")
    }
}

/// Whether `s` is a plain identifier.
fn identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The source variable an access's array is named by (`` `c` (heap block ...) `` gives `c`).
fn array_name(a: &Access) -> Option<&str> {
    let name = a.array.as_deref()?.strip_prefix('`')?.split('`').next()?;
    identifier(name).then_some(name)
}

/// How loop `l`'s iterations write the arrays they write.
enum Writes {
    /// Each iteration writes (and reads) only its own chunk of each array, from the array's
    /// start: (array, elements per chunk).
    Chunks(Vec<(String, u64)>),
    /// Some array is written otherwise (interleaved, unnamed): its name, when it has one.
    Otherwise(Option<String>),
}

/// The arrays loop `l` writes with a different place per iteration, and whether each
/// iteration's accesses to each stay in a chunk of its own.
fn writes(region: &Region, l: usize) -> Writes {
    let mut out: Vec<(String, u64)> = Vec::new();
    let inside = region.statements_in(l);
    for s in &inside {
        let Some(d) = s.loops.iter().position(|&x| x == l) else {
            continue;
        };
        for a in s.accesses.iter().filter(|a| a.write) {
            // The same place in every iteration: a scalar the verdict privatizes or reduces.
            let Some(Some(step)) = a.strides.get(d).copied() else {
                return Writes::Otherwise(array_name(a).map(str::to_string));
            };
            if step == 0 {
                continue;
            }
            let Some(name) = array_name(a) else {
                return Writes::Otherwise(None);
            };
            match chunk(region, l, name, step) {
                Some(k) if out.iter().all(|(n, c)| n != name || *c == k) => {
                    if !out.iter().any(|(n, _)| n == name) {
                        out.push((name.to_string(), k));
                    }
                }
                _ => return Writes::Otherwise(Some(name.to_string())),
            }
        }
    }
    Writes::Chunks(out)
}

/// The elements per chunk when every access of loop `l`'s statements to array `name` stays,
/// in each iteration of `l`, in the chunk of `step` bytes that iteration's number selects
/// from the array's start (its lowest first address in the region).
fn chunk(region: &Region, l: usize, name: &str, step: i64) -> Option<u64> {
    let accesses = || {
        region
            .statements
            .iter()
            .flat_map(|s| s.accesses.iter().map(move |a| (s, a)))
            .filter(|(_, a)| array_name(a) == Some(name))
    };
    let start = accesses().map(|(_, a)| a.base).min()??;
    let mut size = None;
    for (s, a) in accesses().filter(|(s, _)| s.loops.contains(&l)) {
        let d = s.loops.iter().position(|&x| x == l)?;
        if a.strides.get(d).copied()?? != step || *size.get_or_insert(a.size) != a.size {
            return None;
        }
        // Its place in iteration 0 of `l`, over the loops inside `l`; the loops around `l`
        // must not move it.
        let mut lo = a.base? - start;
        let mut hi = lo + i64::from(a.size);
        for (k, &inner) in s.loops.iter().enumerate() {
            let stride = a.strides.get(k).copied()??;
            if k < d && stride != 0 {
                return None;
            }
            if k > d {
                let span = stride * (region.trips.get(inner).copied()?? as i64 - 1);
                if span < 0 {
                    lo += span;
                } else {
                    hi += span;
                }
            }
        }
        if lo < 0 || hi > step {
            return None;
        }
    }
    let size = i64::from(size?);
    (step > 0 && step % size == 0).then(|| (step / size) as u64)
}

/// What a chunk of `k` elements is called: the bound of a loop inside `l` that runs `k`
/// iterations (`n` in `for j in 0..n`), else the number.
fn chunk_len(region: &Region, l: usize, k: u64) -> String {
    region
        .statements_in(l)
        .iter()
        .flat_map(|s| s.loops.iter().skip_while(|&&x| x != l).skip(1))
        .filter(|&&inner| region.trips.get(inner).copied().flatten() == Some(k))
        .find_map(|&inner| {
            let f = parse_for(region.headers.get(&region.loops[inner].id)?)?;
            let bound = f.iterable.strip_prefix("0..")?;
            identifier(bound).then(|| bound.to_string())
        })
        .unwrap_or_else(|| k.to_string())
}

/// The rayon iterator over loop `l`'s iterations, the closure's parameter, and a sentence on
/// what the form leaves to the user (arrays it cannot split).
fn iteration(region: &Region, l: usize) -> (String, String, String) {
    let header = region.headers.get(&region.loops[l].id);
    let f = header.and_then(|h| parse_for(h));
    let (pattern, iterable) = f
        .as_ref()
        .map_or(("i", "0..n"), |f| (f.pattern, f.iterable));
    let plain = (par_iter(iterable), pattern.to_string(), String::new());
    match writes(region, l) {
        Writes::Chunks(arrays) if arrays.is_empty() => plain,
        Writes::Chunks(arrays)
            if arrays.len() <= 2 && identifier(pattern) && iterable.starts_with("0..") =>
        {
            let split = |(name, k): &(String, u64)| {
                if *k == 1 {
                    (
                        format!("{name}.par_iter_mut()"),
                        format!("{name}_{pattern}"),
                    )
                } else {
                    let len = chunk_len(region, l, *k);
                    (
                        format!("{name}.par_chunks_mut({len})"),
                        format!("{name}_row"),
                    )
                }
            };
            let parts: Vec<(String, String)> = arrays.iter().map(split).collect();
            let (iter, param) = match parts.as_slice() {
                [(i, p)] => (i.clone(), p.clone()),
                [(i1, p1), (i2, p2)] => (format!("{i1}.zip({i2})"), format!("({p1}, {p2})")),
                _ => unreachable!("one or two arrays"),
            };
            (
                format!("{iter}.enumerate()"),
                format!("({pattern}, {param})"),
                String::new(),
            )
        }
        Writes::Chunks(arrays) => {
            let names: Vec<String> = arrays.iter().map(|(n, _)| format!("`{n}`")).collect();
            let note = format!(
                " Split {} into each iteration's chunk with `par_chunks_mut` and `zip`: a closure cannot write through a shared `&mut`.",
                names.join(", ")
            );
            (plain.0, plain.1, note)
        }
        Writes::Otherwise(name) => {
            let what = name.map_or("an array".to_string(), |n| format!("`{n}`"));
            let note = format!(
                " Its iterations write {what} interleaved, not in chunks of their own: a closure cannot write it through a shared `&mut`, so split it by hand (or transpose it) first."
            );
            (plain.0, plain.1, note)
        }
    }
}

/// The rayon consumer of a reduction on `r`: `s += ....sum::<f64>()`.
fn reduction_form(r: &Requirement, iter: &str, param: &str) -> Option<String> {
    let Change::Reduction {
        op,
        fp,
        array,
        section,
    } = r.change
    else {
        return None;
    };
    let name = r.storage.strip_prefix('`')?.split('`').next()?;
    if !identifier(name) {
        return None;
    }
    if array {
        let zero = if fp { "0.0" } else { "0" };
        let len = section.map_or("len".to_string(), |n| n.to_string());
        return Some(format!(
            "{iter}.fold(|| vec![{zero}; {len}], |mut {name}, {param}| {{ ...; {name} }})"
        ));
    }
    let body = format!("{iter}.map(|{param}| ...)");
    let (zero, one) = if fp { ("0.0", "1.0") } else { ("0", "1") };
    Some(match op {
        ReduceOp::Add if fp => format!("{name} += {body}.sum::<f64>()"),
        ReduceOp::Add => format!("{name} += {body}.reduce(|| {zero}, |a, b| a + b)"),
        ReduceOp::Mul => format!("{name} *= {body}.reduce(|| {one}, |a, b| a * b)"),
        ReduceOp::Min if fp => {
            format!("{name} = {name}.min({body}.reduce(|| f64::INFINITY, f64::min))")
        }
        ReduceOp::Max if fp => {
            format!("{name} = {name}.max({body}.reduce(|| f64::NEG_INFINITY, f64::max))")
        }
        ReduceOp::Min => format!("{name} = {name}.min({body}.min().unwrap_or({name}))"),
        ReduceOp::Max => format!("{name} = {name}.max({body}.max().unwrap_or({name}))"),
        ReduceOp::And => format!("{name} &= {body}.reduce(|| !0, |a, b| a & b)"),
        ReduceOp::Or => format!("{name} |= {body}.reduce(|| 0, |a, b| a | b)"),
        ReduceOp::Xor => format!("{name} ^= {body}.reduce(|| 0, |a, b| a ^ b)"),
        ReduceOp::LogicalOr => format!("{name} = {name} || {body}.any(|set| set)"),
        ReduceOp::LogicalAnd => format!("{name} = {name} && {body}.all(|kept| kept)"),
    })
}

/// The storage changes a closure makes by itself, in words: a variable the closure declares
/// is each iteration's own.
fn closure_locals(needs: &[Requirement]) -> Vec<String> {
    let named = |change: Change| -> Vec<String> {
        let mut v: Vec<String> = needs
            .iter()
            .filter(|r| r.change == change)
            .filter_map(|r| r.private_variable().map(|v| format!("`{v}`")))
            .collect();
        v.dedup();
        v
    };
    let mut out = Vec::new();
    let (first, last) = (named(Change::FirstPrivate), named(Change::LastPrivate));
    // A copy in or out is the closure's own variable already.
    let mut private = named(Change::Privatize);
    private.retain(|v| !first.contains(v) && !last.contains(v));
    if !private.is_empty() {
        out.push(format!(
            "{} declared with `let` inside the closure",
            private.join(", ")
        ));
    }
    if !first.is_empty() {
        out.push(format!(
            "{} copied into the closure (`let mut x = x;` at its top)",
            first.join(", ")
        ));
    }
    if !last.is_empty() {
        out.push(format!(
            "the last iteration's {} computed again after the loop (a closure's locals do not outlive it)",
            last.join(", ")
        ));
    }
    out
}

/// The parallelize suggestion's sentence for loop `l` of a Rust region (`label`, run
/// `inside` other loops), legal after `needs`.
pub(super) fn parallel_text(
    region: &Region,
    l: usize,
    label: &str,
    inside: &str,
    needs: &[Requirement],
) -> String {
    let (iter, param, note) = iteration(region, l);
    let (reductions, others) = split_reductions(needs);
    // What a closure's own `let`s make private needs no words beyond them; other changes
    // (a copy, an expansion, a substitution) are the source's to make.
    let locals = closure_locals(needs);
    let rest: Vec<Requirement> = others
        .into_iter()
        .filter(|r| match r.change {
            // A compiler temporary needs no change in the source: a closure's temporaries
            // are each iteration's own.
            Change::Privatize => false,
            Change::FirstPrivate | Change::LastPrivate => r.private_variable().is_none(),
            _ => true,
        })
        .collect();
    let with = if locals.is_empty() {
        String::new()
    } else {
        format!(", with {}", locals.join(" and "))
    };
    let after = after_phrase(&rest);
    let reduced: Vec<&Requirement> = needs.iter().filter(|r| r.clause().is_some()).collect();
    let then = if locals.is_empty() && rest.is_empty() {
        "no dependence of any kind is carried by it"
    } else {
        "then no dependence is carried by it"
    };
    let mut text = match reduced.as_slice() {
        [] => format!(
            "Run loop {label} in parallel with rayon (e.g. `{iter}.for_each(|{param}| ...)`){inside}{with}{after}: {then}."
        ),
        [r] => {
            let form = reduction_form(r, &iter, &param).unwrap_or_else(|| {
                format!("{iter}.map(|{param}| ...).reduce(|| identity, |a, b| a op b)")
            });
            let storage = if r.lines.is_empty() {
                r.storage.clone()
            } else {
                format!("{} (at {})", r.storage, r.lines.join(", "))
            };
            format!(
                "Run loop {label} in parallel as a reduction with rayon (e.g. `{form}`){inside}{with}{after}: each thread accumulates {storage} in a partial result of its own, combined after the loop."
            )
        }
        _ => format!(
            "Run loop {label} in parallel as a reduction with rayon (e.g. `{iter}.map(|{param}| ...)` giving a tuple of the {} partial results, then `.reduce(..)`){inside}{with}{after}: each thread accumulates them apart, combined after the loop.",
            reductions.len()
        ),
    };
    text.push_str(&note);
    text.push_str(&fp_note(needs));
    text
}

/// The vectorize suggestion's sentence for a Rust loop: Rust has no directive for it; rustc
/// vectorizes at -O what it can prove independent, and reorders no floating-point sum.
pub(super) fn vectorize_text(label: &str, needs: &[Requirement], share: f64) -> String {
    let (clauses, others) = split_reductions(needs);
    let after = after_phrase(&others);
    if clauses.is_empty() {
        return format!(
            "Vectorize loop {label}: its iterations are independent{after} and {share:.0}% of its accesses are stride 0 or 1. Rust has no directive for it: rustc vectorizes such a loop at -O once no bounds check is left in it (iterate over slices, e.g. with `zip`, rather than index)."
        );
    }
    let fp = needs
        .iter()
        .any(|r| matches!(r.change, Change::Reduction { fp: true, .. }));
    let how = if fp {
        "rustc does not reorder a floating-point sum, so accumulate into several partial results (an array of 4 or 8, one per lane) and combine them after the loop"
    } else {
        "rustc vectorizes an integer reduction itself at -O once no bounds check is left in the loop"
    };
    format!(
        "Vectorize loop {label} as a reduction{after}: each vector lane accumulates a partial result, and {share:.0}% of its accesses are stride 0 or 1. Rust has no directive for it: {how}.{}",
        fp_note(needs)
    )
}

/// The rayon form a Rust suggestion's text quotes, for the code after the advice.
pub(crate) fn quoted_form(text: &str) -> Option<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .find(|q| q.contains("par_") || q.contains("into_par_iter"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_for_statement() {
        let f = parse_for("for i in 0..n {").expect("a for");
        assert_eq!((f.pattern, f.iterable), ("i", "0..n"));
        let f = parse_for("'rows: for (x, v) in a.iter().enumerate() {").expect("labelled");
        assert_eq!(f.pattern, "(x, v)");
        assert_eq!(par_iter(f.iterable), "a.par_iter().enumerate()");
        assert!(parse_for("while i < n {").is_none());
    }

    #[test]
    fn parallel_iterators() {
        assert_eq!(par_iter("0..n"), "(0..n).into_par_iter()");
        assert_eq!(par_iter("(0..n).rev()"), "(0..n).into_par_iter()");
        assert_eq!(
            par_iter("(0..n).step_by(2)"),
            "(0..n).into_par_iter().step_by(2)"
        );
        assert_eq!(par_iter("&mut v"), "v.par_iter_mut()");
        assert_eq!(par_iter("c.chunks_mut(n)"), "c.par_chunks_mut(n)");
        assert_eq!(par_iter("items"), "items.into_par_iter()");
    }

    #[test]
    fn a_sum_is_summed() {
        let r = Requirement {
            change: Change::Reduction {
                op: ReduceOp::Add,
                fp: true,
                array: false,
                section: None,
            },
            storage: "`s` (register xmm0)".into(),
            lines: vec![],
            step: None,
        };
        assert_eq!(
            reduction_form(&r, "(0..n).into_par_iter()", "i").as_deref(),
            Some("s += (0..n).into_par_iter().map(|i| ...).sum::<f64>()")
        );
    }
}
