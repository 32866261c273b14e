//! What the feedback stage is given for one region.

pub use crate::poly::{Polyhedra, Tuple};
use std::collections::BTreeMap;
pub use tracer::DepKind;

/// A loop of the region (a loop node of the dynamic schedule tree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// Stable id, e.g. `L2`.
    pub id: String,
    /// Source location, `file.c:12` (or function+offset).
    pub label: String,
}

/// A memory access of a statement, with its address's stride along each of the statement's
/// dimensions (`None`: the address is not affine along it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub strides: Vec<Option<i64>>,
    /// Bytes accessed.
    pub size: u32,
    pub write: bool,
    /// Address at the first iteration (the constant term of the affine address), if affine.
    pub base: Option<i64>,
    /// The array or variable accessed: a global's symbol, a heap block's allocation site, a
    /// stack slot's function.
    pub array: Option<String>,
}

impl Access {
    /// Stride 0 (the same element) or ±1 element along dimension `d`.
    pub fn stride01(&self, d: usize) -> bool {
        matches!(self.strides.get(d), Some(Some(s)) if *s == 0 || s.unsigned_abs() == u64::from(self.size))
    }
}

/// A statement: a (non-scalar-evolution) instruction in one context.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// isl tuple name, e.g. `S3`.
    pub name: String,
    /// For a person: `k.c:14 addsd xmm0, [rax]`.
    pub label: String,
    /// The region loop (index into [`Region::loops`]) of each of the statement's dimensions,
    /// outermost first.
    pub loops: Vec<usize>,
    /// Original order: the statement's static position under the root and under each of its
    /// loops (Kelly's mapping), `loops.len() + 1` entries.
    pub positions: Vec<u32>,
    /// The statement's iteration domain, a set over `name[i0, i1, ...]`.
    pub domain: Polyhedra,
    /// Dynamic instances.
    pub ops: u64,
    pub accesses: Vec<Access>,
    /// Floating-point arithmetic.
    pub fp: bool,
    /// Whether the domain was folded exactly.
    pub exact: bool,
    /// What the instruction computes, when it can take part in a reduction (a copy or an
    /// associative update); `None` for anything else, and for blocks of instructions.
    pub update: Option<Update>,
}

impl Statement {
    /// The source lines its label starts with: one for an instruction (`k.c:14 addsd ...`),
    /// each of a block's (`k.c:8, k.c:9 (S0-S23, 24 instructions)`).
    pub fn lines(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for token in self.label.split(' ') {
            out.push(token.trim_end_matches(','));
            if !token.ends_with(',') {
                break;
            }
        }
        out
    }
}

/// An associative and commutative operator a reduction combines values with (subtraction
/// counts as addition of the negated value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReduceOp {
    Add,
    Mul,
    Min,
    Max,
    And,
    Or,
    Xor,
    /// C's `||` on a flag the loop only sets to `true` (bfs's `stop = true;`): each thread's
    /// copy starts `false`, and the original is `true` after the loop when it was before or
    /// when an iteration set it, as in the program's order.
    LogicalOr,
    /// C's `&&` on a flag the loop only sets to `false`.
    LogicalAnd,
}

impl ReduceOp {
    /// The operator as OpenMP's `reduction` clause spells it.
    pub fn clause(&self) -> &'static str {
        match self {
            ReduceOp::Add => "+",
            ReduceOp::Mul => "*",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "&",
            ReduceOp::Or => "|",
            ReduceOp::Xor => "^",
            ReduceOp::LogicalOr => "||",
            ReduceOp::LogicalAnd => "&&",
        }
    }
}

/// An instruction that copies a value or combines it with another by an associative operator:
/// a link of a reduction's chain from reading the accumulator to writing it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// `None`: a copy (load, store, register move); else `dst = acc op other`.
    pub op: Option<ReduceOp>,
    /// Registers (full names, `rax`, `xmm0`) through which the accumulated value may come in:
    /// the copy's source, or the operands the operator lets play the accumulator (both for
    /// commutative ones, the first for a subtraction).
    pub acc_registers: Vec<String>,
    /// Whether the memory operand may bring the accumulated value in.
    pub acc_memory: bool,
}

/// A dependence between two statements of the region: flow (read after write), anti (write
/// after read) or output (write after write), through a register, a scalar, an array, or the
/// hidden state of natively-run library code.
#[derive(Clone, Debug, PartialEq)]
pub struct Dependence {
    /// Producer statement name.
    pub source: String,
    /// Consumer statement name.
    pub sink: String,
    pub kind: DepKind,
    pub storage: Storage,
    /// From the consumer's instances to the producer's: `{ S3[i] -> S1[i - 1] : ... }`.
    /// Shared with the region's report ([`crate::pipeline::DependenceReport`]): myocyte's
    /// region has 91,000 of them, most over a kilobyte.
    pub relation: std::sync::Arc<Polyhedra>,
    pub exact: bool,
    /// Whether it pairs instances with equal coordinates (known from the folded pieces).
    pub equal_pairs: EqualPairs,
    /// For a flow dependence through a register no source variable names, produced by a
    /// plain load: the array (as [`Access::array`] names it) the value was loaded from. The
    /// register then only mirrors that memory (gcc keeps a stencil's `a[i + 1]` for the next
    /// iteration's `a[i]`): where no iteration writes the array, reading it again removes
    /// the dependence.
    pub reload: Option<String>,
    /// For a dependence through an array element that the compiler kept in a register
    /// (`crate::mirror`): that register, through which its statements read and write the
    /// element.
    pub mirror: Option<String>,
    /// For a flow dependence through a register: the loops ([`Loop::id`]) along which the
    /// value is one value, written outside the loop and only copied inside it (a pointer
    /// spilled and restored around an inner loop). It orders no iterations of those loops.
    pub invariant_in: Vec<String>,
}

/// Whether a dependence pairs instances with equal coordinates: between two instructions
/// merged into one block statement, such a pair is inside one instance of the block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EqualPairs {
    /// No pair has (each piece steps by a nonzero constant along some loop).
    Never,
    /// Every pair has (within one iteration).
    Always,
    /// Some pairs may: isl tells.
    #[default]
    Unknown,
}

impl Dependence {
    /// A flow dependence, or one that no renaming of storage removes: the scheduler must
    /// respect it.
    pub fn binding(&self) -> bool {
        self.kind == DepKind::Flow || !self.storage.renamable()
    }
}

/// A value an instruction that only sets the flags reads (`cmp`, `test`, `ucomisd`, `bt`),
/// produced by a statement of the region (never a scalar evolution: loop counters and
/// Rust's iterator bounds are none). Comparisons are no statements, so no dependence shows
/// it; the branch it decides still depends on the value. The legality checks read it where
/// the producer and the comparison run in different iterations of a loop (`if (x > 5)` on the
/// `x` the previous iteration computed), and where a reduction's partial value is compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// The producer statement (a block's name once statements are grouped).
    pub source: String,
    pub storage: Storage,
    /// The comparison's source line (`k.c:7`).
    pub line: String,
    /// The producer's source line.
    pub source_line: String,
    /// The comparison's loops (indices into [`Region::loops`]), outermost first.
    pub loops: Vec<usize>,
    /// Per nonempty piece of the folded relation: for each loop both ends run in (an index
    /// into [`Region::loops`], outermost first), the interval of the comparison's coordinate
    /// minus the producer's.
    pub distances: Vec<Vec<(usize, Span)>>,
    /// As [`Dependence::reload`]: the array the register's value was plainly loaded from.
    pub reload: Option<String>,
    /// As [`Dependence::invariant_in`].
    pub invariant_in: Vec<String>,
}

/// A closed integer interval; `None` bounds are infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub lo: Option<i128>,
    pub hi: Option<i128>,
}

/// A value crossing the region's border: read inside from a write before the region
/// (live-in), or written inside and read after it (live-out).
#[derive(Clone, Debug, PartialEq)]
pub struct Boundary {
    /// The statement of the region that reads (live-in) or writes (live-out) it.
    pub stmt: String,
    pub storage: Storage,
    /// Between the statement's instances and the instruction outside, whose tuple is
    /// `Outside`: `{ S2[i] -> Outside[] }` for live-in reads, `{ Outside[] -> S2[i] }` for
    /// live-out writes (consumer to producer, as dependences).
    pub relation: Polyhedra,
    /// Source location of the instruction outside, for a person.
    pub outside: String,
}

/// One region of the dynamic schedule tree, with its polyhedral DDG.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    pub loops: Vec<Loop>,
    pub statements: Vec<Statement>,
    /// Every dependence between statements of the region.
    pub dependences: Vec<Dependence>,
    /// Library calls made inside the region (they run natively: opaque to the analysis).
    pub library_calls: Vec<String>,
    /// Iterations of each loop (largest coordinate + 1), when known.
    pub trips: Vec<Option<u64>>,
    /// Values the region reads that were written before it.
    pub live_in: Vec<Boundary>,
    /// Values the region writes that are read after it, up to the program's exit.
    pub live_out: Vec<Boundary>,
    /// Values the region writes that are overwritten after it (an output dependence to a
    /// write outside, `{ Outside[] -> S2[i] }`): the storage is used again later, so its
    /// contraction or sharing would reach code this region does not show.
    pub rewritten_after: Vec<Boundary>,
    /// Source variables declared outside some of the region's loops and assigned in them
    /// (found on the loops' source lines, or, where the source cannot be read, in the
    /// registers debug information names).
    pub shared_variables: Vec<SharedVariable>,
    /// Scalars in memory that are source variables declared in the body of loops of the
    /// region, one per iteration already (nothing to privatize): their storage's description
    /// (`` `u` (stack of main) ``) -> the ids of those loops.
    pub declared_in: BTreeMap<String, Vec<String>>,
    /// Arrays the region's code reaches through a pointer (a heap block, an array passed as a
    /// parameter), by their storage's [`Storage::variable`] (`` `y` ``): how many of the
    /// pointer's elements the array spans, for the section an OpenMP clause must name
    /// (`reduction(+: y[0:len])`; a pointer cannot be reduced whole).
    pub sections: BTreeMap<String, u64>,
    /// The program's own OpenMP worksharing loops among [`Region::loops`], by loop id.
    pub omp_loops: BTreeMap<String, OmpLoop>,
    /// Loops whose source body can leave them early (`break`, `return`, `goto`), by loop id:
    /// the line that does. No `omp for` can run them.
    pub early_exits: BTreeMap<String, String>,
    /// The source language of the region's code (its hottest statement's compilation unit):
    /// the advice's directives are written in it.
    pub language: symbols::Language,
    /// The source text of each loop's statement (`for i in 0..n {`), by loop id, in Rust
    /// regions only: rayon's form of a parallel loop is written from its pattern and
    /// iterator.
    pub headers: BTreeMap<String, String>,
    /// Values comparisons read ([`Compared`]): no dependence shows them, since comparisons
    /// are no statements.
    pub compared: Vec<Compared>,
}

impl Region {
    /// The statements that run inside loop `l` (an index into [`Region::loops`]).
    pub fn statements_in(&self, l: usize) -> Vec<&Statement> {
        self.statements
            .iter()
            .filter(|s| s.loops.contains(&l))
            .collect()
    }

    /// The deepest nesting of loops around a statement.
    pub fn loop_depth(&self) -> usize {
        self.statements
            .iter()
            .map(|s| s.loops.len())
            .max()
            .unwrap_or(0)
    }
}

/// A loop the program itself runs in parallel: the outermost loop of a parallel body the
/// compiler outlined from an OpenMP construct, which the runtime's threads share.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OmpLoop {
    /// The directive as the source writes it (`#pragma omp parallel for private(j)`), when
    /// the source can be read.
    pub directive: Option<String>,
    /// The counter of the loop statement below the directive (`i`), private to each thread.
    pub counter: Option<String>,
    /// The line of that loop statement (gcc may name the loop by a line of its body).
    pub line: Option<u32>,
    /// The variables the loop statement declares (in its header or body), from debug
    /// information: each iteration's own.
    pub declared: Vec<String>,
    /// The variables the directive's data-sharing clauses name (`private(j)`,
    /// `reduction(+: s)`), lowercase: each thread's own.
    pub clauses: Vec<String>,
    /// Those of its `reduction` clauses, lowercase: their copies carry partial results from
    /// iteration to iteration by design.
    pub reduced: Vec<String>,
    /// The loop statement's source lines: its file's name (`k.c`), its first and last line.
    pub span: Option<(String, u32, u32)>,
    /// The outlined body (`main._omp_fn.0`).
    pub body: String,
    /// Variables the loop's body assigns in the source that are not variables of the
    /// outlined body (debug information): the enclosing function's or globals, which the
    /// loop's threads share. The counter and the directive's clauses' variables are the
    /// body's own.
    pub shared_writes: Vec<SharedWrite>,
    /// The program's functions whose calls enclose the body: their stack variables are
    /// shared by the loop's threads (the body's own frame, and those it calls, are each
    /// thread's own).
    pub shared_frames: Vec<String>,
    /// Arrays the loop's body indexes by the thread number (`partial[tid][k]`,
    /// `tid = omp_get_thread_num()`): a row per thread, each thread's own.
    pub thread_rows: Vec<String>,
    /// Where the source allocates those rows (`kmeans_clustering.c:177`), as heap blocks are
    /// named.
    pub thread_blocks: Vec<String>,
}

impl OmpLoop {
    /// Whether the compiled parallel body keeps `storage` per thread in memory: a stack
    /// variable of a frame other than those around the body, or a variable the directive's
    /// clauses name (registers are each thread's own too, but a value a register carries
    /// between iterations is what the source passed through shared memory).
    pub fn keeps_in_memory(&self, storage: &Storage) -> bool {
        let name = match storage {
            Storage::Scalar { name, .. } | Storage::Array { name } => name,
            Storage::Register { var: Some(v), .. } => return self.in_clauses(v),
            _ => return false,
        };
        if self.on_own_stack(name) || self.thread_row(name) {
            return true;
        }
        let var = name
            .strip_prefix("array ")
            .unwrap_or(name)
            .strip_prefix('`')
            .and_then(|n| n.split('`').next());
        var.is_some_and(|v| self.in_clauses(v))
    }

    /// Whether dependence `d` goes through what each thread keeps to itself
    /// ([`Self::keeps_in_memory`]) and so binds no two threads. Not a value an iteration leaves
    /// in a variable of a `private` clause for a later iteration to read: that iteration may
    /// run in another thread, whose copy holds another value, or none (Rodinia hotspot's
    /// `delta`, assigned on the grid's edges only and read at every point); a reduction's
    /// copy carries partial results by design, and the loop's counter its next value. Only a
    /// read in the loop statement's own lines is one of the directive's variable: a local of
    /// a function inlined into the body may have its name (kmeans's `index`, which gcc -O2
    /// reads in a `cmov` before the call assigns it).
    pub fn keeps_to_itself(&self, d: &Dependence, region: &Region) -> bool {
        if !self.keeps_in_memory(&d.storage) {
            return false;
        }
        if d.kind != DepKind::Flow {
            return true;
        }
        let var = match &d.storage {
            Storage::Register { var: Some(v), .. } => Some(v.as_str()),
            Storage::Scalar { name, .. } | Storage::Array { name } => name
                .strip_prefix("array ")
                .unwrap_or(name)
                .strip_prefix('`')
                .and_then(|n| n.split('`').next()),
            _ => None,
        };
        let Some((file, first, last)) = &self.span else {
            return true;
        };
        let in_body = |at: &str| {
            at.rsplit_once(':').is_some_and(|(f, n)| {
                f == file
                    && n.parse::<u32>()
                        .is_ok_and(|n| (*first..=*last).contains(&n))
            })
        };
        let read_in_body = region
            .statements
            .iter()
            .find(|s| s.name == d.sink)
            .is_some_and(|s| s.lines().into_iter().any(in_body));
        let passed = read_in_body
            && var.is_some_and(|v| {
                self.in_clauses(v)
                    && !self.reduced.iter().any(|r| r.eq_ignore_ascii_case(v))
                    && !self
                        .counter
                        .as_deref()
                        .is_some_and(|c| c.eq_ignore_ascii_case(v))
            });
        !passed
    }

    /// Whether storage named `name` ([`Storage::describe`]) is a stack variable of a frame
    /// other than those around the body: the body's own, or a callee's.
    pub fn on_own_stack(&self, name: &str) -> bool {
        let frame = ["(stack of ", "a stack slot of ", "a stack array of "]
            .iter()
            .find_map(|m| {
                let at = name.find(m)? + m.len();
                let rest = &name[at..];
                let end = rest.find([')', ' ']).unwrap_or(rest.len());
                Some(&rest[..end])
            });
        frame.is_some_and(|f| !self.shared_frames.iter().any(|s| s == f))
    }

    /// Whether storage named `name` ([`Storage::describe`]) is in a row the body indexes by
    /// the thread number: an array of [`OmpLoop::thread_rows`], or a block allocated at one
    /// of [`OmpLoop::thread_blocks`]. With one thread every iteration uses row 0; with more,
    /// each thread its own.
    pub fn thread_row(&self, name: &str) -> bool {
        let block = self.thread_blocks.iter().any(|site| {
            let at = format!("allocated at {site}");
            name.match_indices(&at)
                .any(|(k, _)| !name[k + at.len()..].starts_with(|c: char| c.is_ascii_digit()))
        });
        let var = name
            .strip_prefix("array ")
            .unwrap_or(name)
            .strip_prefix('`')
            .and_then(|n| n.split('`').next());
        block || var.is_some_and(|v| self.thread_rows.iter().any(|r| r == v))
    }

    /// Whether the directive's data-sharing clauses name variable `v`.
    pub fn in_clauses(&self, v: &str) -> bool {
        self.clauses.iter().any(|c| c.eq_ignore_ascii_case(v))
    }
}

/// A shared variable an OpenMP loop's body assigns ([`OmpLoop::shared_writes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedWrite {
    pub name: String,
    /// `file.c:12`.
    pub line: String,
    /// The reduction operator when the assignment computes the variable from its own value
    /// (`u += x` gives `+`); `None`: it sets it afresh.
    pub op: Option<&'static str>,
}

/// A source variable declared outside loops whose iterations assign it. Wherever the compiler
/// keeps it (a register is each thread's own in a parallel run), in the source the variable is
/// one for all the iterations, shared by the threads unless it is made private.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SharedVariable {
    pub name: String,
    /// Registers debug information places it in where it is assigned (none when only the
    /// source's text shows the assignment).
    pub registers: Vec<String>,
    /// Ids of the loops ([`Loop::id`]) whose iterations assign it, declared outside them.
    pub loops: Vec<String>,
    /// Source lines (`file.c:12`) of its assignments.
    pub lines: Vec<String>,
    /// Ids of the loops whose code assigns it on the `for` statement of a loop around the one
    /// they are named after (so which source loop they are is uncertain): (loop id, line).
    pub merged: Vec<(String, String)>,
    /// (loop id, line) of its assignments that compute it from its own value (`memcnt += 4`,
    /// `k++`), in loops where no assignment sets it afresh: each iteration starts from the
    /// previous one's value (a reduction, or an induction variable the source keeps).
    pub steps: Vec<(String, String)>,
    /// (loop id, step, lines) for the loops among [`SharedVariable::steps`] where the
    /// source steps it by one statement that every iteration runs the same number of times:
    /// its step per iteration of that loop as C text (`(n2 + 1) * sizeof(float)`), and the
    /// `for` loops between (`file.c:N`), whose trip counts are its factors. OpenMP's
    /// `linear(memcnt: step)` keeps it stepped as written once those loops' trip counts are
    /// the same in every iteration (checked on the domains).
    pub linear: Vec<(String, String, Vec<String>)>,
    /// (loop id, line, operator) of its assignments that combine its value with data by an
    /// associative operator (`s += a[i]`): the source's own reduction, which names the
    /// accumulator register of a vectorized loop when debug information names none.
    pub accumulates: Vec<(String, String, ReduceOp)>,
    /// (loop id, line, literal) of its assignments that store a constant (`stop = true;`,
    /// `found = 1;`), in loops where every assignment to it does: the loop only raises or
    /// lowers a flag, whose value after the loop is the constant when some iteration stored
    /// it (unless the loop also reads it: see `reads`).
    pub flags: Vec<(String, String, String)>,
    /// (loop id, line) of the first line of each loop whose source reads it other than by
    /// storing a constant into it (`if (!seen && a[i] == k) seen = 1;`), among the loops
    /// that assign it. gcc -O0 compares such a flag in memory (`cmpl $0, -0x20(%rbp)`),
    /// which no dependence shows (comparisons are no statements).
    pub reads: Vec<(String, String)>,
}

impl SharedVariable {
    /// `` `t` (register xmm0) ``, as [`Storage::describe`] names a register variable, or
    /// `` `t` `` where no register is known.
    pub fn describe(&self) -> String {
        if self.registers.is_empty() {
            format!("`{}`", self.name)
        } else {
            format!("`{}` (register {})", self.name, self.registers.join(", "))
        }
    }
}

impl PartialEq for Storage {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Storage {}

impl PartialOrd for Storage {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Storage {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl std::hash::Hash for Storage {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// Where a value is kept.
///
/// Two storages are the same when they are the same register or memory: the variable a
/// register is named after (debug information may name it at one instruction and not at
/// another) does not count.
#[derive(Clone, Debug)]
pub enum Storage {
    /// A register (`rax`, `xmm1`), with the source variable debug information places there,
    /// when it does.
    Register { reg: String, var: Option<String> },
    /// A memory location that stays the same over the dependence's instances (a scalar kept
    /// in memory), named.
    Scalar { addr: u64, name: String },
    /// Memory that moves with the iterations (an array), named.
    Array { name: String },
    /// State hidden inside natively-run library code (the output stream of `printf`, the
    /// generator of `rand`), described.
    Effect { name: String },
}

impl Storage {
    /// What identifies the storage: kind, name and address.
    fn key(&self) -> (u8, &str, u64) {
        match self {
            Storage::Register { reg, .. } => (0, reg, 0),
            Storage::Scalar { addr, name } => (1, name, *addr),
            Storage::Array { name } => (2, name, 0),
            Storage::Effect { name } => (3, name, 0),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Storage::Register { reg, var: Some(v) } => format!("`{v}` (register {reg})"),
            Storage::Register { reg, var: None } => format!("register {reg}"),
            Storage::Scalar { name, .. } => name.clone(),
            Storage::Array { name } => format!("array {name}"),
            Storage::Effect { name } => name.clone(),
        }
    }

    /// The variable this storage belongs to, for matching accesses that name it differently
    /// (`` `sum`+16 `` and ``array `sum` ``; a heap block at any offset). A stack location
    /// may be reached through a pointer, where debug information cannot name it, so every
    /// location of one function's frame is taken for the same variable: more matches only
    /// make the legality checks more cautious.
    pub fn root(&self) -> String {
        match self {
            Storage::Register { reg, .. } => format!("register {reg}"),
            Storage::Effect { name } => name.clone(),
            Storage::Scalar { name, .. } | Storage::Array { name } => {
                if let Some(rest) = name
                    .strip_prefix("a stack slot of ")
                    .or_else(|| name.strip_prefix("a stack array of "))
                    .or_else(|| {
                        // `` `s` (stack of main) ``: named by debug information, but a pointer
                        // may reach the same frame unnamed.
                        name.split_once(" (stack of ")
                            .map(|(_, f)| f.trim_end_matches(')'))
                    })
                {
                    let function = rest.split(" (").next().unwrap_or(rest);
                    return format!("the stack frame of {function}");
                }
                if let Some(end) = name.strip_prefix('`').and_then(|r| r.find('`')) {
                    return name[..end + 2].to_string();
                }
                name.split(" (+").next().unwrap_or(name).to_string()
            }
        }
    }

    /// The source variable memory is named by (`` `h` `` for ``array `h` (stack of main)`` or
    /// `` `y`+16 (heap block ...) ``); `None` for registers, effects and unnamed memory.
    pub fn variable(&self) -> Option<&str> {
        match self {
            Storage::Scalar { name, .. } | Storage::Array { name } => {
                let end = name.strip_prefix('`')?.find('`')?;
                Some(&name[..end + 2])
            }
            _ => None,
        }
    }

    /// A register or a scalar in memory (expandable, privatizable).
    pub fn is_scalar(&self) -> bool {
        matches!(self, Storage::Register { .. } | Storage::Scalar { .. })
    }

    /// Whether giving each instance its own copy (expansion, privatization) can remove the
    /// anti and output dependences through it: scalars and registers can be renamed; an array
    /// only under the conditions the legality model checks; library state never.
    pub fn renamable(&self) -> bool {
        self.is_scalar()
    }
}

/// Whether `w` is a machine register's name (`xmm1`, `rax`, `r11d`).
fn is_register_name(w: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let vector = ["xmm", "ymm", "zmm"]
        .iter()
        .any(|p| w.strip_prefix(p).is_some_and(digits));
    let named = matches!(
        w,
        "rax"
            | "rbx"
            | "rcx"
            | "rdx"
            | "rsi"
            | "rdi"
            | "rbp"
            | "rsp"
            | "eax"
            | "ebx"
            | "ecx"
            | "edx"
            | "esi"
            | "edi"
            | "ax"
            | "bx"
            | "cx"
            | "dx"
            | "al"
            | "bl"
            | "cl"
            | "dl"
    );
    let numbered = w
        .strip_prefix('r')
        .map(|n| n.trim_end_matches(['d', 'w', 'b']))
        .is_some_and(|n| digits(n) && n.parse::<u8>().is_ok_and(|n| (8..16).contains(&n)));
    vector || named || numbered
}

/// A text of advice as a person reads it: storage named by the program, not by the machine.
/// A source variable the compiler keeps in a register is its name (`` `a` (register xmm0) ``
/// becomes `` `a` ``); a register debug information names no variable for is the value it
/// holds, by the lines that compute it: `register xmm0 (at k.c:7)` becomes `the value
/// computed at k.c:7`, and so does every other mention of xmm0 in the text, or, with no line
/// in the text, by `lines` (a reduction's). The analysis keeps its own descriptions
/// ([`Storage::describe`]): only what is printed changes.
pub fn plain_storage(text: &str, lines: &[String]) -> String {
    if !text.contains("register ") {
        return text.to_string();
    }
    // `name` (register xmm0[, xmm1]) -> `name`.
    let mut s = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(k) = rest.find("` (register ") {
        let after = &rest[k + "` (register ".len()..];
        let end = after.find(')');
        let regs_ok =
            end.is_some_and(|e| after[..e].split(", ").all(|r| is_register_name(r.trim())));
        s.push_str(&rest[..=k]);
        match end {
            Some(e) if regs_ok => rest = &after[e + 1..],
            _ => rest = &rest[k + 1..],
        }
    }
    s.push_str(rest);
    // Lines each unnamed register's value is computed on, where the text says them.
    let mut at: BTreeMap<String, String> = BTreeMap::new();
    for (k, _) in s.match_indices("register ") {
        let tail = &s[k + "register ".len()..];
        let reg: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !is_register_name(&reg) {
            continue;
        }
        let after = &tail[reg.len()..];
        for open in [" (at ", " (written at "] {
            if let Some(p) = after.strip_prefix(open) {
                if let Some(e) = p.find(')') {
                    at.entry(reg.clone()).or_insert_with(|| p[..e].to_string());
                }
            }
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(k) = rest.find("register ") {
        let word_start = k == 0 || !rest[..k].ends_with(|c: char| c.is_ascii_alphanumeric());
        let tail = &rest[k + "register ".len()..];
        let reg: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !word_start || !is_register_name(&reg) {
            out.push_str(&rest[..k + "register ".len()]);
            rest = tail;
            continue;
        }
        out.push_str(&rest[..k]);
        let mut after = &tail[reg.len()..];
        match at.get(&reg) {
            Some(l) => {
                out.push_str("the value computed at ");
                out.push_str(l);
                for open in [" (at ", " (written at "] {
                    if let Some(p) = after.strip_prefix(open) {
                        if let Some(e) = p.find(')') {
                            after = &p[e + 1..];
                        }
                    }
                }
            }
            None if !lines.is_empty() => {
                out.push_str("the value computed at ");
                out.push_str(&lines.join(", "));
            }
            None => out.push_str("a value the compiler keeps in a register"),
        }
        rest = after;
    }
    out.push_str(rest);
    read_as_prose(out)
}

/// Turns the templates' phrases around a register's replacement into prose: "the values of
/// the value computed at L" into "the values computed at L", and "the source variable the
/// value computed at L holds" into "the source variable that holds the value computed at L".
fn read_as_prose(text: String) -> String {
    const VALUE: &str = "the value computed at ";
    let text = text.replace(&format!("the values of {VALUE}"), "the values computed at ");
    let variable = format!("the source variable {VALUE}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(k) = rest.find(&variable) {
        let lines = &rest[k + variable.len()..];
        let Some(e) = lines.find(" holds") else {
            break;
        };
        out.push_str(&rest[..k]);
        out.push_str("the source variable that holds ");
        out.push_str(VALUE);
        out.push_str(&lines[..e]);
        rest = &lines[e + " holds".len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod plain_tests {
    use super::plain_storage;

    #[test]
    fn storage_named_by_the_program() {
        let none: &[String] = &[];
        assert_eq!(
            plain_storage(
                "a flow dependence through `a` (register xmm0) at r.rs:25",
                none
            ),
            "a flow dependence through `a` at r.rs:25"
        );
        assert_eq!(
            plain_storage(
                "after a reduction on register xmm0 (at f.f90:23): then ... on the source variable register xmm0 holds",
                none
            ),
            "after a reduction on the value computed at f.f90:23: then ... on the source variable that holds the value computed at f.f90:23"
        );
        assert_eq!(
            plain_storage("reduction(+: <register xmm0>)", &["f.f90:23".to_string()]),
            "reduction(+: <the value computed at f.f90:23>)"
        );
        assert_eq!(
            plain_storage("a 16-byte vector register and register pressure", none),
            "a 16-byte vector register and register pressure"
        );
        assert_eq!(
            plain_storage(
                "privatizing `t` (register xmm0, xmm1) and register rcx",
                none
            ),
            "privatizing `t` and a value the compiler keeps in a register"
        );
    }
}
