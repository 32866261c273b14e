//! What the feedback stage is given for one region.

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
    /// isl set of the statement's iteration domain, over `name[i0, i1, ...]`.
    pub domain: String,
    /// Dynamic instances.
    pub ops: u64,
    pub accesses: Vec<Access>,
    /// Floating-point arithmetic.
    pub fp: bool,
    /// Whether the domain was folded exactly.
    pub exact: bool,
}

/// A flow dependence between two statements of the region.
#[derive(Clone, Debug, PartialEq)]
pub struct Dependence {
    /// Producer statement name.
    pub source: String,
    /// Consumer statement name.
    pub sink: String,
    /// isl map from the consumer's instances to the producer's: `{ S3[i] -> S1[i - 1] : ... }`.
    pub relation: String,
    pub exact: bool,
}

/// One region of the dynamic schedule tree, with its polyhedral DDG.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    pub loops: Vec<Loop>,
    pub statements: Vec<Statement>,
    pub dependences: Vec<Dependence>,
    /// Library calls made inside the region (they run natively: opaque to the analysis).
    pub library_calls: Vec<String>,
}
