//! TEMPORARY stand-in until the real token ledger lands.
use crate::message::ChatMessage;
/// Estimate.
pub struct Estimate { /// tokens
 pub tokens: u64 }
/// Ledger.
#[derive(Default)]
pub struct TokenLedger;
impl TokenLedger {
    /// sync
    pub fn sync(&mut self, _m: &[ChatMessage]) {}
    /// estimate
    pub fn estimate(&mut self, m: &[ChatMessage], from: usize, fixed: &str, _b: u64) -> Estimate { Estimate { tokens: (fixed.len() / 4) as u64 + m[from..].iter().map(|x| (x.text_content().len() / 4 + 4) as u64).sum::<u64>() } }
    /// one
    pub fn message_tokens(&mut self, m: &[ChatMessage], i: usize) -> u64 { (m[i].text_content().len() / 4 + 4) as u64 }
}
/// exact
pub fn exact_tokens(t: &str) -> usize { t.len() / 4 }
