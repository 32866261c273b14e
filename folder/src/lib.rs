//! Folding of iteration-point streams into polyhedra (issue 5). Not implemented yet: this crate
//! exports nothing, so nothing downstream can pretend to use it.
