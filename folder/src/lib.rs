//! Folding of iteration-point streams into unions of polyhedra with affine labels (POLY-PROF
//! §5, issue 5).
//!
//! Input: per stream, points in strictly increasing lexicographic order (canonical iteration
//! coordinates), each with a label vector (accessed address, produced value, or the producer's
//! coordinates for a dependence). Output ([`Folded`]): a union of [`Piece`]s; each is a
//! polyhedron in nested-loop form ([`Domain`]: per dim, affine lower and upper bounds in the
//! outer dims and a stride) and, per label component, an affine function valid on the whole
//! piece ([`Label::Affine`]) or a range ([`Label::Range`]).
//!
//! # Algorithm (see [`StreamFolder`])
//! The innermost dim folds into runs (constant step, labels on one affine line). Each outer
//! level folds consecutive slices: pieces of consecutive values of its coordinate fold into one
//! when they have the same shape (coefficients, strides) and their constants (bounds, labels)
//! change affinely with the coordinate, which makes inner bounds affine functions of outer
//! coordinates (triangles, shifted starts). A dim that takes a single value on a piece (a
//! one-point run, a one-slice group) leaves its coefficients free: they adopt the neighbour's
//! (a triangle's first row, the last row of `j >= i`). A two-slice group that breaks on its
//! third slice is split again as {first}, {second, third} (peeled first iterations). All
//! arithmetic is checked: an overflow means "does not fold", never a wrong answer.
//!
//! # Exactness
//! Exact (every piece exact, re-enumeration gives back the input) whenever the stream is a
//! nest where each dim runs over `lo(x) + s*k, k = 0..n(x)` with `lo`, `n` affine in the outer
//! dims, `s` constant and labels affine with integer coefficients: rectangles, triangles
//! (`j <= i`, `j >= i`), strides and guards (`i % 2`) with bounds tight on the lattice, shifted
//! starts, peeled iterations, zero-trip inner loops, gaps (more pieces), descending labels.
//! Points whose bounds are a min or max of affine functions fold into one piece per affine part.
//!
//! # Over-approximation
//! Bounds (see [`FoldOptions`]) on the pieces per slice and per stream turn the excess into a
//! bounding box per level and one per stream: approximate ([`Piece::exact`] false), with exact
//! point counts, each label component affine if one function fits all its points, else a
//! [`Label::Range`]. Every observed point stays covered. A label component that keeps breaking
//! runs while the domain goes on (a data-dependent value), or keeps rows of the same shape
//! apart (rows reached through pointer arrays), is *demoted* to a range for the rest of the
//! stream, so that the domain and the other components still fold exactly
//! ([`Piece::domain_exact`]). Over-approximated: data-dependent bounds and labels, lattices whose
//! first or last point is not affine (`j <= i` with `j % 2 == 0`, checkerboards `(i + j) % 2`),
//! labels whose step is not a multiple of the domain's stride (`A[i / 2]` on bytes), and
//! anything beyond the bounds.
//!
//! # Cost
//! `push` extending the current innermost run is O(dims + labels) without allocation; outer
//! levels work once per run or slice. State is bounded by the options, not by the stream length.

mod checked;
mod isl;
mod piece;
mod stream;
mod work;

pub use piece::{
    AffineExpr, Constraint, ConstraintKind, DimBound, Domain, Folded, Label, LabelledPoint, Piece,
};
pub use stream::StreamFolder;

/// Options of the folder. Every field has a documented default ([`FoldOptions::default`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FoldOptions {
    /// Pieces one slice may hold at one level before the excess is boxed: runs per innermost
    /// slice (beyond it, runs of at most `noise_run_points` points join a bounding box) and
    /// open groups per outer level (beyond it, unmatched pieces join the level's box).
    /// Default 16.
    pub max_pieces_per_slice: usize,
    /// Exact pieces one stream may hold; beyond it the smallest join the stream's box.
    /// Default 64.
    pub max_pieces_per_stream: usize,
    /// Length (in points) up to which a run counts as noise once its slice is over
    /// `max_pieces_per_slice`. Default 2.
    pub noise_run_points: u64,
    /// Label demotion: a label component that has broken this many innermost runs, at least
    /// one per 16 points on average, while the domain went on regularly (a data-dependent value
    /// next to an affine address) becomes a range for the rest of the stream, so that the
    /// domain and the other components keep folding exactly and fast. Outer levels do the same
    /// after 4 slices (at least one in 4) that fit a group but for a label (rows reached through
    /// pointer arrays, `conn[k][j]`). 0 disables both. Default 32.
    pub demote_after_breaks: u64,
}

impl Default for FoldOptions {
    fn default() -> FoldOptions {
        FoldOptions {
            max_pieces_per_slice: 16,
            max_pieces_per_stream: 64,
            noise_run_points: 2,
            demote_after_breaks: 32,
        }
    }
}

/// A materialized stream: `(point, label)` pairs in increasing lexicographic order of points.
pub type Stream = Vec<(Vec<i64>, Vec<i64>)>;

/// Folds one materialized stream; dims and label count come from its first point.
pub fn fold_points(points: &[(Vec<i64>, Vec<i64>)], opts: &FoldOptions) -> Folded {
    let (d, l) = points
        .first()
        .map_or((0, 0), |(p, lab)| (p.len(), lab.len()));
    let mut f = StreamFolder::new(d, l, opts);
    for (p, lab) in points {
        f.push(p, lab);
    }
    f.finish()
}

/// Folds many independent streams in parallel with rayon (on the current rayon pool), keeping
/// their order. The points are freed on the calling thread afterwards: freeing another thread's
/// allocations from rayon's workers costs more than folding them.
pub fn fold_all<K: Send>(streams: Vec<(K, Stream)>, opts: &FoldOptions) -> Vec<(K, Folded)> {
    use rayon::prelude::*;
    let (keys, points): (Vec<K>, Vec<Stream>) = streams.into_iter().unzip();
    let folded: Vec<Folded> = points
        .par_iter()
        .map(|pts| fold_points(pts, opts))
        .collect();
    drop(points);
    keys.into_iter().zip(folded).collect()
}
