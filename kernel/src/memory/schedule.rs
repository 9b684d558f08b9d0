//! TEMPORARY stand-in until the real schedule lands.
use std::time::Duration;
use chrono::{DateTime, Utc};
/// err
#[derive(Debug, thiserror::Error)]
#[error("bad")]
pub struct ScheduleError;
/// sched
#[derive(Debug, Clone)]
pub enum DreamSchedule { /// every
 Every(Duration) }
impl DreamSchedule {
    /// next
    pub fn next_after(&self, after: DateTime<Utc>, _tz: chrono_tz::Tz) -> Option<DateTime<Utc>> { match self { DreamSchedule::Every(d) => Some(after + chrono::Duration::from_std(*d).ok()?) } }
}
/// settings
#[derive(Debug, Clone)]
pub struct DreamSettings { /// s
 pub schedule: DreamSchedule, /// m
 pub model: Option<String>, /// b
 pub max_batch_size: usize, /// i
 pub max_iterations: u32, /// e
 pub enabled: bool }
impl Default for DreamSettings { fn default() -> Self { DreamSettings { schedule: DreamSchedule::Every(Duration::from_secs(7200)), model: None, max_batch_size: 20, max_iterations: 10, enabled: true } } }
impl DreamSettings {
    /// parse
    pub fn from_config(_v: &serde_json::Value) -> Result<DreamSettings, ScheduleError> { Ok(DreamSettings::default()) }
}
