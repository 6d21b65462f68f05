//! Episode rules.
