//! How the answers are said: the sentences of the parallelize and vectorize suggestions (their
//! OpenMP clauses, the reductions and the storage changes they need), and why nothing, or
//! nothing more, could be done (`fb.why_not`).

use super::Nest;
use crate::legality::{Change, Requirement};
use crate::{Feedback, SuggestionKind};
use std::fmt::Write as _;

/// Adds `reason` to what `fb.why_not` says.
pub(super) fn add_why_not(fb: &mut Feedback, reason: String) {
    fb.why_not = Some(match fb.why_not.take() {
        Some(w) => format!("{w}; {reason}"),
        None => reason,
    });
}

/// Why nothing, or nothing more, could be done: `fb.why_not`.
pub(super) fn explain(
    nest: &Nest<'_>,
    first_blocked: Option<&(usize, String)>,
    skipped: &[&'static str],
    schedule_note: Option<&str>,
    fb: &mut Feedback,
) {
    if !fb
        .suggestions
        .iter()
        .any(|s| s.kind == SuggestionKind::Parallelize)
    {
        if let Some((l, why)) = first_blocked {
            let reason = format!("loop {} cannot run in parallel: {why}", nest.label(*l));
            fb.why_not = Some(match fb.why_not.take() {
                Some(w) if fb.suggestions.is_empty() => format!("{w}; {reason}"),
                Some(w) => format!("no parallel loop: {reason}; {w}"),
                None => format!("no parallel loop: {reason}"),
            });
        }
    }
    if !skipped.is_empty() {
        add_why_not(
            fb,
            format!(
                "the checks of {} stopped at isl's budget (raise it with --isl-max-operations)",
                skipped.join(" and ")
            ),
        );
    }
    if let Some(note) = schedule_note {
        add_why_not(fb, note.to_string());
    }
    let region = nest.region;
    if fb.suggestions.is_empty() && fb.why_not.is_none() {
        fb.why_not = Some(if !region.library_calls.is_empty() {
            format!(
                "the region calls {} natively, which hides its effects",
                region.library_calls.join(", ")
            )
        } else {
            "no transformation improves parallelism or locality here".to_string()
        });
    }
}

/// The reduction clauses among `needs`, and the other storage changes.
pub(super) fn split_reductions(needs: &[Requirement]) -> (Vec<String>, Vec<Requirement>) {
    // One clause per operator, as a person writes it: `reduction(+: xe, ye)`.
    let mut by_op: Vec<(String, Vec<String>)> = Vec::new();
    for c in needs.iter().filter_map(Requirement::clause) {
        let Some((op, var)) = c.split_once(": ") else {
            continue;
        };
        let var = var.trim_end_matches(')').to_string();
        // Storage without a name stays a clause of its own, which the text leaves out.
        if var.starts_with('<') {
            by_op.push((op.to_string(), vec![var]));
            continue;
        }
        let named = |vars: &[String]| !vars.iter().any(|v| v.starts_with('<'));
        match by_op.iter_mut().find(|(o, vars)| o == op && named(vars)) {
            Some((_, vars)) if vars.contains(&var) => {}
            Some((_, vars)) => vars.push(var),
            None => by_op.push((op.to_string(), vec![var])),
        }
    }
    let clauses = by_op
        .into_iter()
        .map(|(op, vars)| format!("{op}: {})", vars.join(", ")))
        .collect();
    let others = needs
        .iter()
        .filter(|r| r.clause().is_none())
        .cloned()
        .collect();
    (clauses, others)
}

/// The storage of the reductions among `needs`, with their lines: "`y` (at k.c:36)".
fn reduced_storage(needs: &[Requirement]) -> String {
    let mut named: Vec<String> = Vec::new();
    for r in needs.iter().filter(|r| r.clause().is_some()) {
        let n = if r.lines.is_empty() {
            r.storage.clone()
        } else {
            format!("{} (at {})", r.storage, r.lines.join(", "))
        };
        // Two reductions on one array (its load and its store) are one storage to name.
        if !named.contains(&n) {
            named.push(n);
        }
    }
    named.join(" and ")
}

/// That combining partial floating-point results reassociates, when it does.
pub(super) fn fp_note(needs: &[Requirement]) -> String {
    let fp = needs
        .iter()
        .any(|r| matches!(r.change, Change::Reduction { fp: true, .. }));
    match fp {
        true => " Combining partial results reassociates floating-point arithmetic: the result may differ in the last bits.".to_string(),
        false => String::new(),
    }
}

/// What a person must know before making a reduction parallel: floating point reassociates,
/// and an array section's length is this run's.
pub(super) fn reduction_notes(needs: &[Requirement]) -> String {
    let mut out = fp_note(needs);
    // The section's length is the run's, not the source's: at another input size the clause
    // must name the array's length there.
    let sections: Vec<String> = needs
        .iter()
        .filter_map(|r| match (&r.change, r.clause()) {
            (
                Change::Reduction {
                    section: Some(len), ..
                },
                Some(_),
            ) => Some(len.to_string()),
            _ => None,
        })
        .fold(Vec::new(), |mut seen, len| {
            if !seen.contains(&len) {
                seen.push(len);
            }
            seen
        });
    if !sections.is_empty() {
        let _ = write!(
            out,
            " The section's length ({}) is the array's in this run: write the length it has in the source.",
            sections.join(", ")
        );
    }
    out
}

/// The OpenMP data-sharing clauses of the privatizations among `needs` that name source
/// variables: `private(i, j)`, `firstprivate(t)`, `lastprivate(last)` (a variable given a
/// first or last value is not also in `private`).
fn sharing_clauses<'a>(needs: &'a [Requirement]) -> Vec<String> {
    let named = |change: Change| -> Vec<&str> {
        needs
            .iter()
            .filter(|r| r.change == change)
            .filter_map(Requirement::private_variable)
            .collect()
    };
    // A variable in a reduction clause may be in no other data-sharing clause (gcc: "appears
    // more than once in data clauses").
    let reduced: Vec<String> = needs
        .iter()
        .filter_map(Requirement::clause)
        .filter_map(|c| {
            c.split_once(": ")
                .map(|(_, v)| v.trim_end_matches(')').to_string())
        })
        .collect();
    let unreduced = |vars: Vec<&'a str>| -> Vec<&'a str> {
        vars.into_iter()
            .filter(|v| !reduced.iter().any(|r| r == v))
            .collect()
    };
    let (first, last) = (
        unreduced(named(Change::FirstPrivate)),
        unreduced(named(Change::LastPrivate)),
    );
    let mut conditional = unreduced(named(Change::LastConditional));
    conditional.dedup();
    let mut private: Vec<&str> = unreduced(named(Change::Privatize))
        .into_iter()
        .chain(unreduced(named(Change::ClosedForm)))
        .filter(|v| !first.contains(v) && !last.contains(v) && !conditional.contains(v))
        .collect();
    private.sort_unstable();
    private.dedup();
    let mut linear: Vec<String> = needs
        .iter()
        .filter_map(Requirement::linear_clause)
        .collect();
    linear.dedup();
    [
        ("private(", private),
        ("firstprivate(", first),
        ("lastprivate(", last),
        ("lastprivate(conditional: ", conditional),
    ]
    .into_iter()
    .filter(|(_, vars)| !vars.is_empty())
    .map(|(clause, vars)| format!("{clause}{})", vars.join(", ")))
    .chain(linear)
    .collect()
}

/// The parallelize suggestion's sentence for loop `label`, run `inside` other loops, legal
/// after `needs`; `plain`: a loop inside it that is parallel without a reduction. The pragma
/// it gives carries the clauses of the reductions and privatizations it names.
pub(super) fn parallel_text(
    label: &str,
    inside: &str,
    needs: &[Requirement],
    plain: Option<String>,
) -> String {
    let (clauses, others) = split_reductions(needs);
    let pragma: String = std::iter::once("#pragma omp parallel for".to_string())
        .chain(sharing_clauses(needs))
        .chain(clauses.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    if needs
        .iter()
        .any(|r| matches!(r.change, Change::ClosedForm | Change::LocalArray { .. }))
    {
        // The pragma alone would break the program: it comes after the rewrite, and says so.
        return format!(
            "Run loop {label} in parallel{inside} after {}: then no dependence is carried by it, and the loop takes `{pragma}`.",
            phrases(needs)
        );
    }
    // A value kept for after the loop (or taken from before it) in storage debug information
    // names no variable for: no clause can be printed for it, so no pragma is printed as if
    // complete (legal_last's `last` in xmm0 at -O2).
    // The same for a reduction on storage with no name (a compiler temporary in a register):
    // `reduction(+: <register rcx>)` does not compile.
    let unnamed: Vec<&Requirement> = needs
        .iter()
        .filter(|r| {
            (matches!(
                r.change,
                Change::FirstPrivate | Change::LastPrivate | Change::LastConditional
            ) && r.private_variable().is_none())
                || r.clause().is_some_and(|c| c.contains('<'))
        })
        .collect();
    if !unnamed.is_empty() {
        let pragma: String = std::iter::once("#pragma omp parallel for".to_string())
            .chain(sharing_clauses(needs))
            .chain(clauses.iter().filter(|c| !c.contains('<')).cloned())
            .collect::<Vec<_>>()
            .join(" ");
        return format!(
            "Run loop {label} in parallel{inside} after {}: then no dependence is carried by it. The loop takes `{pragma}` plus a `{}` clause on the source variable {} holds, which debug information does not name.",
            phrases(needs),
            unnamed[0].change.as_str(),
            unnamed[0].storage
        );
    }
    if clauses.is_empty() && others.is_empty() {
        return format!(
            "Run loop {label} in parallel (e.g. `{pragma}`){inside}: no dependence of any kind is carried by it."
        );
    }
    if clauses.is_empty() {
        return format!(
            "Run loop {label} in parallel (e.g. `{pragma}`){inside} after {}: then no dependence is carried by it.",
            phrases(needs)
        );
    }
    let mut text = format!(
        "Run loop {label} in parallel as a reduction (e.g. `{pragma}`){inside}: each thread accumulates {} in a copy of its own, combined after the loop",
        reduced_storage(needs)
    );
    if !others.is_empty() {
        let _ = write!(text, ", after {}", phrases(&others));
    }
    text.push('.');
    text.push_str(&reduction_notes(needs));
    let array = needs
        .iter()
        .any(|r| matches!(r.change, Change::Reduction { array: true, .. }));
    if let (true, Some(inner)) = (array, plain) {
        let _ = write!(
            text,
            " Alternatively, loop {inner} is parallel without a reduction, at the cost of a parallel region per iteration of the loops around it."
        );
    }
    text
}

/// A suggestion's sentence in the region's source language: Fortran spells OpenMP's
/// directives `!$omp parallel do` and `!$omp simd` (the clauses read the same). C, C++ and
/// what is not told apart keep `#pragma omp`.
pub(crate) fn in_language(text: &str, language: symbols::Language) -> String {
    match language {
        symbols::Language::Fortran => text
            .replace("`#pragma omp parallel for", "`!$omp parallel do")
            .replace("`#pragma omp simd", "`!$omp simd"),
        _ => text.to_string(),
    }
}

/// " after privatizing `k`", or nothing: the storage changes a sentence names after its
/// directive.
pub(super) fn after_phrase(others: &[Requirement]) -> String {
    if others.is_empty() {
        String::new()
    } else {
        format!(" after {}", phrases(others))
    }
}

/// The vectorize suggestion's sentence.
pub(super) fn vectorize_text(label: &str, needs: &[Requirement], share: f64) -> String {
    let (mut clauses, others) = split_reductions(needs);
    let after = after_phrase(&others);
    // A flag set to one constant keeps its value only with its clause, on lanes as on
    // threads; a variable stepped as written its steps.
    let conditional: Vec<String> = sharing_clauses(needs)
        .into_iter()
        .filter(|c| c.starts_with("lastprivate(conditional:") || c.starts_with("linear("))
        .collect();
    if clauses.is_empty() && !conditional.is_empty() {
        format!(
            "Vectorize loop {label} (e.g. `#pragma omp simd {}`): its iterations are independent{after} and {share:.0}% of its accesses are stride 0 or 1.",
            conditional.join(" ")
        )
    } else if clauses.is_empty() {
        format!(
            "Vectorize loop {label}: its iterations are independent{after} and {share:.0}% of its accesses are stride 0 or 1."
        )
    } else if let Some(op) = array_reduction(needs) {
        // A clause on the array's section gives each lane a copy of the whole section and
        // adds all of it back: slow, and a race with the threads of a parallel loop around
        // (syrk's rows, applied with gcc 12). The element each run accumulates is one scalar.
        let arrays = reduced_arrays(needs);
        if arrays.len() > 1 {
            // gesummv's `tmp[i]` and `y[i]`: one accumulator each, the clause naming all.
            let accs: Vec<String> = arrays.iter().map(|a| format!("acc_{a}")).collect();
            let quoted: Vec<String> = accs.iter().map(|a| format!("`{a}`")).collect();
            return format!(
                "Vectorize loop {label} as a reduction{after}: each vector lane accumulates {}. Sum each element into a local scalar of its own ({}) declared before the loop, add each to its element after the loop, and use `#pragma omp simd reduction({op}: {})`: a reduction clause on the arrays would give each lane a copy of all of them. {share:.0}% of its accesses are stride 0 or 1.{}",
                reduced_storage(needs),
                list(&quoted),
                accs.join(", "),
                fp_note(needs)
            );
        }
        format!(
            "Vectorize loop {label} as a reduction{after}: each vector lane accumulates {}. Sum the element into a local scalar `acc` declared before the loop, add `acc` to it after the loop, and use `#pragma omp simd reduction({op}: acc)`: a reduction clause on the array would give each lane a copy of all of it. {share:.0}% of its accesses are stride 0 or 1.{}",
            reduced_storage(needs),
            fp_note(needs)
        )
    } else {
        clauses.extend(conditional);
        format!(
            "Vectorize loop {label} as a reduction (e.g. `#pragma omp simd {}`){after}: each vector lane accumulates {}, and {share:.0}% of its accesses are stride 0 or 1.{}",
            clauses.join(" "),
            reduced_storage(needs),
            reduction_notes(needs)
        )
    }
}

/// The names of the arrays whose elements `needs` reduce (with the first one's operator), once
/// each, when every one has a plain name.
fn reduced_arrays(needs: &[Requirement]) -> Vec<String> {
    let op = array_reduction(needs);
    let mut out: Vec<String> = Vec::new();
    for r in needs {
        let Change::Reduction {
            op: o, array: true, ..
        } = r.change
        else {
            continue;
        };
        let name = r
            .storage
            .strip_prefix("array ")
            .unwrap_or(&r.storage)
            .strip_prefix('`')
            .and_then(|s| s.split('`').next())
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_'));
        match name {
            Some(n) if Some(o.clause()) == op => {
                if !out.iter().any(|x| x == n) {
                    out.push(n.to_string());
                }
            }
            _ => return Vec::new(),
        }
    }
    out
}

/// The operator of a reduction on an array's elements among `needs`, if any.
fn array_reduction(needs: &[Requirement]) -> Option<&'static str> {
    needs.iter().find_map(|r| match r.change {
        Change::Reduction {
            op, array: true, ..
        } => Some(op.clause()),
        _ => None,
    })
}

/// Storage changes for a sentence: "privatizing `t` and reading `a` from a copy ...".
pub(super) fn phrases(needs: &[Requirement]) -> String {
    // Source variables a clause privatizes go by name, one phrase per clause (their lines
    // are in report.json's `requires`): heartwall's loops privatize five variables each,
    // written on a dozen lines.
    let named = |change: Change| -> Vec<String> {
        needs
            .iter()
            .filter(|r| r.change == change)
            .filter_map(|r| r.private_variable().map(|v| format!("`{v}`")))
            .collect()
    };
    let (first, last) = (named(Change::FirstPrivate), named(Change::LastPrivate));
    let mut out = Vec::new();
    for (change, phrase) in [
        (Change::Privatize, "privatizing {}"),
        (
            Change::FirstPrivate,
            "giving each thread a copy of {} initialised before the loop (`firstprivate`)",
        ),
        (
            Change::LastPrivate,
            "keeping the last iteration's {} after the loop (`lastprivate`)",
        ),
    ] {
        let mut vars = named(change);
        if change == Change::Privatize {
            // `firstprivate` and `lastprivate` privatize already.
            vars.retain(|v| !first.contains(v) && !last.contains(v));
        }
        if !vars.is_empty() {
            out.push(phrase.replace("{}", &list(&vars)));
        }
    }
    // Values expanded along one loop, one phrase when there are many: omp_own.c's
    // distribution expands seven variables of one frame along the same line (700 characters
    // one by one). A few keep a phrase each.
    let grouped = |r: &Requirement| {
        expanded_along(r).is_some_and(|(_, line)| {
            needs
                .iter()
                .filter_map(expanded_along)
                .filter(|(_, l)| *l == line)
                .count()
                >= EXPANSIONS_IN_ONE_PHRASE
        })
    };
    out.extend(
        needs
            .iter()
            .filter(|r| {
                !matches!(
                    r.change,
                    Change::Privatize | Change::FirstPrivate | Change::LastPrivate
                ) || r.private_variable().is_none()
            })
            .filter(|r| !grouped(r))
            .map(Requirement::phrase),
    );
    let mut along: Vec<(&str, Vec<&str>)> = Vec::new();
    for (what, line) in needs
        .iter()
        .filter(|r| grouped(r))
        .filter_map(expanded_along)
    {
        match along.iter_mut().find(|(l, _)| *l == line) {
            Some((_, v)) => v.push(what),
            None => along.push((line, vec![what])),
        }
    }
    for (line, what) in along {
        // Each thing once; those of one frame listed together, the frame said once after
        // them (`` `c0` and `up` (stack of f) ``).
        let mut frames: Vec<(&str, Vec<String>)> = Vec::new();
        for w in what {
            let (name, frame) = w.find(" (").map_or((w, ""), |k| w.split_at(k));
            let name = name.to_string();
            match frames.iter_mut().find(|(f, _)| *f == frame) {
                Some((_, names)) if names.contains(&name) => {}
                Some((_, names)) => names.push(name),
                None => frames.push((frame, vec![name])),
            }
        }
        let parts: Vec<String> = frames
            .iter()
            .map(|(frame, names)| format!("{}{frame}", list(names)))
            .collect();
        out.push(format!("expanding {} along {line}", parts.join(", ")));
    }
    // Registers no variable names read alike in the user's text ("a value the compiler
    // keeps in a register"): one phrase for all the registers a change names alike.
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|p| seen.insert(without_register_names(p)));
    out.join(" and ")
}

/// Expansions along one loop line from which they are said in one phrase.
const EXPANSIONS_IN_ONE_PHRASE: usize = 3;

/// An expansion's storage and the loop line it is expanded along (`` `k` (stack of f) along
/// k.c:25 ``), if its description says so.
fn expanded_along(r: &Requirement) -> Option<(&str, &str)> {
    if r.change != Change::Expand {
        return None;
    }
    r.storage.rsplit_once(" along ")
}

/// `p` with the name after each "register " left out.
fn without_register_names(p: &str) -> String {
    let mut key = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(k) = rest.find("register ") {
        key.push_str(&rest[..k + "register ".len()]);
        rest =
            rest[k + "register ".len()..].trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    }
    key.push_str(rest);
    key
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::ReduceOp;

    fn array_sum(name: &str, line: &str) -> Requirement {
        Requirement {
            change: Change::Reduction {
                op: ReduceOp::Add,
                fp: true,
                array: true,
                section: None,
            },
            storage: format!("`{name}`"),
            lines: vec![line.to_string()],
            step: None,
        }
    }

    /// gesummv's `tmp[i]` and `y[i]`: one accumulator each, named in one clause; one
    /// element keeps `acc`.
    #[test]
    fn one_accumulator_per_reduced_element() {
        let two = [array_sum("tmp", "g.c:89"), array_sum("y", "g.c:90")];
        let text = vectorize_text("g.c:87 (L20)", &two, 100.0);
        assert!(
            text.contains("(`acc_tmp` and `acc_y`)")
                && text.contains("`#pragma omp simd reduction(+: acc_tmp, acc_y)`"),
            "{text}"
        );
        let one = vectorize_text("g.c:87 (L20)", &two[..1], 100.0);
        assert!(
            one.contains("`#pragma omp simd reduction(+: acc)`"),
            "{one}"
        );
    }
}
