//! The program's own parallel loops checked against the dependences observed (ARCHITECTURE,
//! decision 13). An OpenMP worksharing loop ([`crate::input::OmpLoop`]) ran with one thread,
//! so its trace holds every iteration; its verdict as a serial loop says which storage its
//! iterations pass values through. What the compiled program keeps per thread (registers,
//! the outlined body's own frame, the variables its directive's clauses name) needs nothing
//! more; what its threads share (globals, the heap, the frames around the parallel body)
//! needs the change the verdict names, or the threads race.

use crate::input::{OmpLoop, Region};
use crate::legality::{Change, Requirement};
use reports::model::{OmpCheck, OmpVerdict};

/// The verdict of loop `l` of `region` when the program runs it in parallel itself: from its
/// verdict as a serial loop (the storage changes that make it parallel, or why none does).
pub(super) fn check(
    region: &Region,
    l: usize,
    serial: Result<&[Requirement], &str>,
) -> Option<OmpCheck> {
    let omp = region.omp_loops.get(&region.loops.get(l)?.id)?;
    let (mut verdict, mut text, mut missing) = match serial {
        Err(why) => (
            OmpVerdict::Race,
            format!("iterations given to different threads race: {why}"),
            Vec::new(),
        ),
        Ok(needs) => judge(region, l, omp, needs),
    };
    // What the source's body assigns among the variables the threads share, whatever the
    // compiler kept them in (gcc keeps a shared `u` of `u += x` in a register for the whole
    // loop: its dependences look like a private reduction's).
    let mut said: Vec<String> = Vec::new();
    for w in &omp.shared_writes {
        if omp.in_clauses(&w.name) {
            continue;
        }
        let (v, clause) = match w.op {
            Some(op) => (
                OmpVerdict::ReductionNeeded,
                format!("reduction({op}: {})", w.name),
            ),
            None => (OmpVerdict::PrivateNeeded, format!("private({})", w.name)),
        };
        if missing.contains(&clause) {
            continue;
        }
        verdict = verdict.max(v);
        said.push(format!(
            "`{clause}` for `{}` (assigned at {})",
            w.name, w.line
        ));
        missing.push(clause);
    }
    if !said.is_empty() {
        let lacks = format!(
            "the directive lacks {}: the variable is shared by the threads, which race on it",
            said.join(" and ")
        );
        text = match verdict {
            OmpVerdict::Race => format!("{text}; {lacks}"),
            _ if text.starts_with("the directive lacks") => format!("{text}; {lacks}"),
            _ => lacks,
        };
    }
    missing.sort();
    missing.dedup();
    Some(OmpCheck {
        directive: omp.directive.clone(),
        body: omp.body.clone(),
        verdict,
        text,
        missing,
    })
}

/// The verdict from the storage changes a serial loop needs: those on storage the threads
/// share are what the directive lacks.
fn judge(
    region: &Region,
    l: usize,
    omp: &OmpLoop,
    needs: &[Requirement],
) -> (OmpVerdict, String, Vec<String>) {
    let mut verdict = OmpVerdict::Parallel;
    let mut missing: Vec<String> = Vec::new();
    let mut said: Vec<String> = Vec::new();
    for r in needs {
        if !shared(region, l, omp, r) {
            continue;
        }
        let name = name_of(&r.storage);
        let at = if r.lines.is_empty() {
            String::new()
        } else {
            format!(" (at {})", r.lines.join(", "))
        };
        let (v, clause) = match r.change {
            Change::Reduction { .. } => (OmpVerdict::ReductionNeeded, r.clause()),
            Change::Privatize => (
                OmpVerdict::PrivateNeeded,
                name.map(|n| format!("private({n})")),
            ),
            Change::FirstPrivate => (
                OmpVerdict::PrivateNeeded,
                name.map(|n| format!("firstprivate({n})")),
            ),
            Change::LastPrivate => (
                OmpVerdict::PrivateNeeded,
                name.map(|n| format!("lastprivate({n})")),
            ),
            Change::LastConditional => (
                OmpVerdict::PrivateNeeded,
                name.map(|n| format!("lastprivate(conditional: {n})")),
            ),
            Change::Linear => (OmpVerdict::PrivateNeeded, r.linear_clause()),
            Change::CopyIn
            | Change::Expand
            | Change::MapToArray
            | Change::ClosedForm
            | Change::LocalArray { .. } => (OmpVerdict::Race, None),
        };
        verdict = verdict.max(v);
        said.push(match (&clause, r.change) {
            (Some(c), _) => format!("`{c}` for {}{at}", r.storage),
            (None, Change::Reduction { .. }) => format!("a reduction on {}{at}", r.storage),
            (None, _) => r.phrase(),
        });
        missing.extend(clause);
    }
    missing.sort();
    missing.dedup();
    let text = match verdict {
        OmpVerdict::Parallel => {
            "no dependence is carried between its iterations through storage its threads share"
                .to_string()
        }
        OmpVerdict::Race => format!(
            "iterations given to different threads race: they share storage that only {} \
             would make safe",
            said.join(" and ")
        ),
        _ => format!(
            "the directive lacks {}: without it, threads race on what their iterations share",
            said.join(" and ")
        ),
    };
    (verdict, text, missing)
}

/// Whether requirement `r` is on storage the loop's threads share in the compiled program
/// (and the directive does not make private).
fn shared(region: &Region, l: usize, omp: &OmpLoop, r: &Requirement) -> bool {
    let name = name_of(&r.storage);
    if let Some(n) = name {
        if omp.in_clauses(n)
            || omp.counter.as_deref() == Some(n)
            || omp.declared.iter().any(|d| d == n)
        {
            return false;
        }
    }
    if !kept_per_thread(&r.storage, omp) {
        return true;
    }
    // A variable of the source declared outside the loop and assigned in it is shared under
    // a combined `parallel for` without a clause, even where the compiler keeps it in a
    // register of the body (each thread then works on a copy of a shared variable: the
    // compiled code is already a race).
    let combined = omp.directive.as_deref().is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d.contains("parallel for") || d.contains("parallel do")
    });
    let id = &region.loops[l].id;
    combined
        && name.is_some_and(|n| {
            region
                .shared_variables
                .iter()
                .any(|v| v.name == n && v.loops.contains(id))
        })
}

/// Whether storage (as [`crate::input::Storage::describe`] names it) is each thread's own in
/// the compiled parallel body: a register, or a stack variable of the body's own frames.
fn kept_per_thread(storage: &str, omp: &OmpLoop) -> bool {
    storage.starts_with("register ")
        || storage.contains(" (register ")
        || omp.on_own_stack(storage)
        || omp.thread_row(storage)
}

/// The source variable storage is named after (`` `s` (stack of main) `` gives `s`).
fn name_of(storage: &str) -> Option<&str> {
    let s = storage.strip_prefix("array ").unwrap_or(storage);
    let name = s.strip_prefix('`')?.split('`').next()?;
    let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    plain.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_what_each_thread_keeps() {
        let shared = OmpLoop {
            shared_frames: vec!["main".to_string()],
            ..OmpLoop::default()
        };
        assert!(kept_per_thread("register xmm0", &shared));
        assert!(kept_per_thread("`t` (register xmm0)", &shared));
        assert!(kept_per_thread("`j` (stack of main._omp_fn.0)", &shared));
        assert!(kept_per_thread(
            "a stack slot of main._omp_fn.0 (0x7ffe0)",
            &shared
        ));
        assert!(!kept_per_thread("`s` (stack of main)", &shared));
        assert!(!kept_per_thread("a stack slot of main (0x7ffe0)", &shared));
        assert!(!kept_per_thread("`total`", &shared));
        assert!(!kept_per_thread("array `a`", &shared));
        assert_eq!(name_of("`s` (stack of main)"), Some("s"));
        assert_eq!(name_of("array `a`"), Some("a"));
        assert_eq!(name_of("register xmm0"), None);
    }
}
