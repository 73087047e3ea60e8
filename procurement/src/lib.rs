//! The procurement pipeline: matches one pod task to what is left of one Mesos offer.
//!
//! Filled in by the procurement issue; nothing here pretends to work yet.
