//! Dynamic control structure and dependences (issues 3 and 4). Not implemented yet: this crate
//! exports nothing, so nothing downstream can pretend to use it.
