//! The splitter's tests: one file per service's rules, the cases every service shares, and
//! properties checked over generated texts.

mod discord;
mod rules;
mod services;
mod slack;
mod telegram;
