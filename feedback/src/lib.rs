//! Polyhedral feedback: regions, isl scheduling, suggestions (issues 6 and 7). Not implemented
//! yet: this crate exports nothing, so nothing downstream can pretend to use it.
