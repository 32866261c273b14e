//! Which source variables a reduction kept in a register no variable is named for stands for.
//! gcc -O2 -ffast-math vectorizes particlefilter's `xe += arrayX[x] * weights[x]; ye += ...`
//! into one register, `xmm2`, whose two lanes are `xe` and `ye`, and debug information names
//! neither there: the reduction found on the register cannot be spelled as a clause. The
//! source can: the variables the loop only accumulates into (`name op= data` on its lines,
//! declared outside it) are the reduction's, and the clause names them
//! (`reduction(+: xe, ye)`), none of them privatized.

use crate::input::{ReduceOp, Region, SharedVariable};
use crate::legality::{Change, Requirement};

/// Replaces, among a loop's `needs`, each reduction on a register no variable is named for by
/// reductions on the source variables it accumulates (matched by line first, then by
/// operator: a vectorized register holds several variables, with the line of one). A reduction
/// no variable matches stays as it is.
pub(crate) fn name_register_reductions(
    region: &Region,
    loop_id: &str,
    needs: &mut Vec<Requirement>,
) {
    let unnamed = |r: &Requirement| {
        matches!(r.change, Change::Reduction { .. }) && r.storage.starts_with("register ")
    };
    if !needs.iter().any(unnamed) {
        return;
    }
    // The loop's accumulated variables not already named by a reduction of their own.
    let named = |name: &str| {
        let quoted = format!("`{name}`");
        needs
            .iter()
            .any(|r| matches!(r.change, Change::Reduction { .. }) && r.storage.contains(&quoted))
    };
    let mut free: Vec<(&str, ReduceOp, Vec<String>)> = Vec::new();
    for v in &region.shared_variables {
        let mine: Vec<&(String, String, ReduceOp)> = v
            .accumulates
            .iter()
            .filter(|(l, _, _)| l == loop_id)
            .collect();
        let Some(&(_, _, op)) = mine.first().copied() else {
            continue;
        };
        if mine.iter().any(|(_, _, o)| *o != op) || named(&v.name) {
            continue;
        }
        let lines = mine.iter().map(|(_, line, _)| line.clone()).collect();
        free.push((v.name.as_str(), op, lines));
    }
    let op_of = |r: &Requirement| match r.change {
        Change::Reduction { op, .. } => Some(op),
        _ => None,
    };
    // Each unnamed reduction's variables: by line, then the rest by operator to the first one.
    let mut owner: Vec<Option<usize>> = vec![None; free.len()];
    for (k, (_, op, lines)) in free.iter().enumerate() {
        owner[k] = needs
            .iter()
            .position(|r| {
                unnamed(r) && op_of(r) == Some(*op) && r.lines.iter().any(|l| lines.contains(l))
            })
            .or_else(|| {
                needs
                    .iter()
                    .position(|r| unnamed(r) && op_of(r) == Some(*op))
            });
    }
    let old = std::mem::take(needs);
    for (i, r) in old.into_iter().enumerate() {
        let mine: Vec<usize> = (0..free.len()).filter(|&k| owner[k] == Some(i)).collect();
        if mine.is_empty() {
            needs.push(r);
            continue;
        }
        let reg = r.storage.trim_start_matches("register ").to_string();
        let Change::Reduction { op, fp, .. } = r.change else {
            needs.push(r);
            continue;
        };
        for k in mine {
            let (name, _, lines) = &free[k];
            needs.push(Requirement {
                change: Change::Reduction {
                    op,
                    fp,
                    array: false,
                    section: None,
                },
                storage: format!("`{name}` (register {reg})"),
                lines: lines.clone(),
                step: None,
            });
        }
    }
}

/// The reduction a variable loop `loop_id` only accumulates into (`total += find(q)`) needs
/// when no reduction was found for it: the trace folded its values into an evolution of the
/// counters (each call returned the same), so no dependence shows the accumulation, yet each
/// iteration adds to the previous one's value. A private copy would start undefined and be
/// lost. Its type is not known here, so the clause announces a possible reassociation.
pub(crate) fn folded_accumulation(v: &SharedVariable, loop_id: &str) -> Option<Requirement> {
    let mine: Vec<&(String, String, ReduceOp)> = v
        .accumulates
        .iter()
        .filter(|(l, _, _)| l == loop_id)
        .collect();
    let &(_, _, op) = mine.first().copied()?;
    if mine.iter().any(|(_, _, o)| *o != op) {
        return None;
    }
    Some(Requirement {
        change: Change::Reduction {
            op,
            fp: true,
            array: false,
            section: None,
        },
        storage: format!("`{}`", v.name),
        lines: mine.iter().map(|(_, line, _)| line.clone()).collect(),
        step: None,
    })
}

/// The clause a flag needs: a variable loop `loop_id` only sets to `true` (bfs's
/// `stop = true;`, read after the loop by `while (stop)`), or only to `false`, or only to one
/// other constant (`found = 1;`), and reads nowhere else. A private copy would lose the value
/// set (the original keeps the one from before the loop), and plain `lastprivate` would keep
/// the last iteration's copy, undefined where that iteration sets none.
/// `reduction(||: stop)` starts each thread's copy at `false` and leaves the original `true`
/// when it was or when some iteration set it, as in the program's order (`&&` and `false`
/// alike). An integer constant is no truth value (the original's value before the loop need
/// not be 0 or 1): `lastprivate(conditional: found)` (OpenMP 5.0) leaves the original the
/// value the sequentially last iteration that stored one stored, the constant, and untouched
/// where none did.
pub(crate) fn flag_reduction(v: &SharedVariable, loop_id: &str) -> Option<Requirement> {
    if read_flag(v, loop_id).is_some() {
        return None;
    }
    let mine: Vec<&(String, String, String)> =
        v.flags.iter().filter(|(l, _, _)| l == loop_id).collect();
    let op = |lit: &str| match lit {
        "true" | "TRUE" => Some(ReduceOp::LogicalOr),
        "false" | "FALSE" => Some(ReduceOp::LogicalAnd),
        _ => None,
    };
    let lines = mine.iter().map(|(_, line, _)| line.clone()).collect();
    let literal = &mine.first()?.2;
    let Some(first) = op(literal) else {
        // One integer (or other) constant, the same on every line.
        if mine.iter().any(|(_, _, lit)| lit != literal) {
            return None;
        }
        return Some(Requirement {
            change: Change::LastConditional,
            storage: v.describe(),
            lines,
            step: None,
        });
    };
    if mine.iter().any(|(_, _, lit)| op(lit) != Some(first)) {
        return None;
    }
    Some(Requirement {
        change: Change::Reduction {
            op: first,
            fp: false,
            array: false,
            section: None,
        },
        storage: v.describe(),
        lines,
        step: None,
    })
}

/// Why a flag loop `loop_id` also reads cannot be made private: each iteration that reads it
/// may read what an earlier one set (`if (!seen && a[i] == k) seen = 1;`), which gcc -O0
/// compares in memory where no dependence shows it. `None`: the variable is no flag of the
/// loop, or the loop does not read it.
pub(crate) fn read_flag(v: &SharedVariable, loop_id: &str) -> Option<String> {
    let (_, at) = v.reads.iter().find(|(l, _)| l == loop_id)?;
    let set: Vec<&str> = v
        .flags
        .iter()
        .filter(|(l, _, _)| l == loop_id)
        .map(|(_, line, _)| line.as_str())
        .collect();
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "`{}` is set to a constant in some iterations (at {}) and read in the loop (at {at}): an iteration may read the value an earlier one set",
        v.name,
        set.join(", ")
    ))
}
