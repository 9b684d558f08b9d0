//! Long-term memory: the archive of summarised conversation (`memory/history.jsonl`), the
//! Consolidator that keeps sessions under their token budget by archiving their oldest part,
//! Dream that folds the archive into SOUL.md, USER.md and MEMORY.md, and the git repository
//! that versions those files.

pub mod history;
pub mod boundary;
pub mod consolidator;
pub mod gate;
pub mod prompts;
