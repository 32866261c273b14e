//! Checked integer helpers: an overflow means "not affine", never a wrong answer.

pub(crate) fn add(a: i64, b: i64) -> Option<i64> {
    a.checked_add(b)
}

pub(crate) fn sub(a: i64, b: i64) -> Option<i64> {
    a.checked_sub(b)
}

pub(crate) fn mul(a: i64, b: i64) -> Option<i64> {
    a.checked_mul(b)
}
