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
    /// Every dependence (flow, anti, output) with the storage it goes through: what storage
    /// advice needs.
    pub storage: Vec<StorageDep>,
    /// Iterations of each loop (largest coordinate + 1), when known.
    pub trips: Vec<Option<u64>>,
}

/// Where a value is kept.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Storage {
    /// A register (`rax`, `xmm1`).
    Register(String),
    /// A memory location that stays the same over the dependence's instances (a scalar kept
    /// in memory), named.
    Scalar { addr: u64, name: String },
    /// Memory that moves with the iterations (an array), named.
    Array { name: String },
}

impl Storage {
    pub fn describe(&self) -> String {
        match self {
            Storage::Register(r) => format!("register {r}"),
            Storage::Scalar { name, .. } => name.clone(),
            Storage::Array { name } => format!("array {name}"),
        }
    }

    /// A register or a scalar in memory (expandable, privatizable).
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Storage::Array { .. })
    }
}

/// A dependence with its kind and storage.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageDep {
    pub source: String,
    pub sink: String,
    /// `flow`, `anti` or `output`.
    pub kind: String,
    pub storage: Storage,
    /// isl map from the consumer's instances to the producer's.
    pub relation: String,
}
