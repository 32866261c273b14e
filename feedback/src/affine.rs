//! Affine rows: a schedule dimension or a dependence's producer coordinate as a linear
//! function of a statement's dimensions, read from isl's objects by [`crate::poly`]. Rows
//! that are not linear (a tile's `floor`, a modulo) are not read, and transformations are
//! then not named from them.

/// An affine expression over a statement's iterators: `sum(coeffs[d] * i_d) + constant`
/// (parameters are ignored: they shift, they do not reorder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub coeffs: Vec<i64>,
    pub constant: i64,
}

impl Affine {
    /// The constant `c` over `dims` dimensions.
    pub fn constant(dims: usize, c: i64) -> Affine {
        Affine {
            coeffs: vec![0; dims],
            constant: c,
        }
    }

    /// Dimension `d` itself, over `dims` dimensions.
    pub fn dim(dims: usize, d: usize) -> Affine {
        let mut coeffs = vec![0; dims];
        if let Some(c) = coeffs.get_mut(d) {
            *c = 1;
        }
        Affine {
            coeffs,
            constant: 0,
        }
    }

    /// The one iterator this expression follows with coefficient ±1, if it is that simple.
    pub fn single_dim(&self) -> Option<usize> {
        let nz: Vec<usize> = (0..self.coeffs.len())
            .filter(|&d| self.coeffs[d] != 0)
            .collect();
        match nz.as_slice() {
            [d] if self.coeffs[*d].abs() == 1 => Some(*d),
            _ => None,
        }
    }

    /// Number of iterators with a nonzero coefficient.
    pub fn dims_used(&self) -> usize {
        self.coeffs.iter().filter(|&&c| c != 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_dimensions_and_their_count() {
        let a = Affine {
            coeffs: vec![0, -1, 0],
            constant: 4,
        };
        assert_eq!(a.single_dim(), Some(1));
        assert_eq!(a.dims_used(), 1);
        let skew = Affine {
            coeffs: vec![1, 1],
            constant: 0,
        };
        assert_eq!(skew.single_dim(), None);
        assert_eq!(skew.dims_used(), 2);
        let scaled = Affine {
            coeffs: vec![2],
            constant: 0,
        };
        assert_eq!(scaled.single_dim(), None);
    }
}
