//! Ranking, apart from storage: query terms, the hybrid score (BM25 keywords and vector
//! similarity), time decay and MMR re-ranking for diversity. Pure functions over
//! [`Candidate`]s, so the arithmetic is tested without a database.

use std::collections::HashSet;
use std::sync::Arc;

/// Words too common to say what a message is about.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "get", "got", "had", "has", "have", "he", "her", "here", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "know", "let", "like", "me", "my", "no", "not",
    "now", "of", "on", "or", "our", "out", "please", "she", "so", "some", "tell", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "would", "you", "your",
];

/// Most query terms used (long messages are cut).
pub const MAX_TERMS: usize = 24;

/// The lowercase words of `text` (letters and digits), in order, repeats kept.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The distinct content words of `text`: no stopwords, no single letters; at most
/// [`MAX_TERMS`].
pub fn terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    words(text)
        .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .take(MAX_TERMS)
        .collect()
}

/// A crude stem (plural and verb endings) so `moved`, `moves` and `move` meet.
pub fn stem(word: &str) -> &str {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.chars().count() >= 3
        {
            return base;
        }
    }
    word
}

/// The stems of `text`'s words, hashed, sorted and without repeats: for overlap and
/// diversity, compared by merging instead of hashing strings.
pub fn stems(text: &str) -> Vec<u64> {
    let mut hashes: Vec<u64> = words(text).map(|w| hash_stem(stem(&w))).collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

fn hash_stem(stem: &str) -> u64 {
    stem.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// How many values two sorted lists share.
fn shared(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// An FTS5 query matching any of `terms` (each quoted, so no word is read as an operator).
pub fn fts_query(terms: &[String]) -> Option<String> {
    let quoted: Vec<String> = terms.iter().map(|t| format!("\"{}\"", t.replace('"', ""))).collect();
    (!quoted.is_empty()).then(|| quoted.join(" OR "))
}

/// One chunk a search found, before ranking.
#[derive(Debug, Clone, Default)]
pub struct Candidate {
    /// BM25 relevance (positive, larger is better), when the keyword search found it.
    pub bm25: Option<f64>,
    /// Cosine similarity to the query vector, when both have one.
    pub cosine: Option<f64>,
    /// Stems of the chunk's text ([`stems`]), shared with the index's cache of read chunks.
    pub stems: Arc<[u64]>,
    /// When it was written (seconds since the epoch); `None` never ages.
    pub time: Option<i64>,
    /// Its vector, for diversity.
    pub vector: Option<Vec<f32>>,
}

/// How scores are combined.
#[derive(Debug, Clone, Copy)]
pub struct Weights {
    /// Weight of the vector similarity.
    pub vector: f64,
    /// Weight of the keyword score.
    pub text: f64,
    /// Days for the age part of the score to halve; 0 is no decay.
    pub half_life_days: f64,
    /// MMR trade-off: 1.0 is relevance only.
    pub lambda: f64,
}

/// Old memory keeps at least this share of its score: recency breaks near-ties, it does not
/// outweigh relevance or erase the past.
const DECAY_FLOOR: f64 = 0.8;

/// A scored candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// Index into the candidates.
    pub index: usize,
    /// Final score in `[0, 1]`.
    pub score: f64,
    /// How many query terms the chunk contains.
    pub matched: usize,
}

/// Scores every candidate for a query with `query_stems`, at `now` (seconds since the epoch),
/// best first.
///
/// Keyword score: half BM25 relative to the best candidate, half the share of query terms
/// the chunk contains (so one rare word does not make a weak match look strong). With
/// vectors, the hybrid is `vector·cosine + text·keywords` (weights normalised); a candidate
/// without a vector (not embedded yet) is scored on keywords alone. Dated memory is then
/// multiplied by `floor + (1 − floor)·0.5^(age / half-life)`.
pub fn score(candidates: &[Candidate], query_stems: &[u64], weights: Weights, now: i64) -> Vec<Scored> {
    let best_bm25 = candidates.iter().filter_map(|c| c.bm25).fold(0.0_f64, f64::max);
    let total = weights.vector + weights.text;
    let (wv, wt) = if total > 0.0 { (weights.vector / total, weights.text / total) } else { (0.0, 1.0) };
    let mut scored: Vec<Scored> = candidates
        .iter()
        .enumerate()
        .map(|(index, candidate)| {
            let matched = shared(query_stems, &candidate.stems);
            let coverage = if query_stems.is_empty() { 0.0 } else { matched as f64 / query_stems.len() as f64 };
            let relative = match candidate.bm25 {
                Some(bm25) if best_bm25 > 0.0 => bm25 / best_bm25,
                _ => 0.0,
            };
            let keywords = 0.5 * relative + 0.5 * coverage;
            let relevance = match candidate.cosine {
                Some(cosine) => wv * cosine.clamp(0.0, 1.0) + wt * keywords,
                None => keywords,
            };
            Scored { index, score: relevance * decay(candidate.time, now, weights.half_life_days), matched }
        })
        .collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    scored
}

/// The age factor of memory written at `time`.
pub fn decay(time: Option<i64>, now: i64, half_life_days: f64) -> f64 {
    let Some(time) = time else { return 1.0 };
    if half_life_days <= 0.0 {
        return 1.0;
    }
    let age_days = ((now - time).max(0) as f64) / 86_400.0;
    DECAY_FLOOR + (1.0 - DECAY_FLOOR) * 0.5_f64.powf(age_days / half_life_days)
}

/// Picks up to `k` of `scored` (best first) by maximal marginal relevance:
/// `λ·score − (1 − λ)·(most similar already picked)`, similarity being the cosine of the two
/// vectors when both have one, else the Jaccard overlap of their stems.
pub fn mmr(scored: &[Scored], candidates: &[Candidate], k: usize, lambda: f64) -> Vec<Scored> {
    let mut picked: Vec<Scored> = Vec::with_capacity(k);
    // Each candidate left, with its largest similarity to anything picked so far (updated
    // against the newest pick only, so a round costs one similarity per candidate).
    let mut left: Vec<(Scored, f64)> = scored.iter().map(|s| (*s, 0.0)).collect();
    while picked.len() < k && !left.is_empty() {
        let (at, _) = left
            .iter()
            .enumerate()
            .map(|(at, (s, redundancy))| (at, lambda * s.score - (1.0 - lambda) * redundancy))
            .fold((0, f64::NEG_INFINITY), |best, next| if next.1 > best.1 { next } else { best });
        let (chosen, _) = left.remove(at);
        if lambda < 1.0 {
            for (s, redundancy) in &mut left {
                *redundancy = redundancy.max(similarity(&candidates[s.index], &candidates[chosen.index]));
            }
        }
        picked.push(chosen);
    }
    picked
}

fn similarity(a: &Candidate, b: &Candidate) -> f64 {
    if let (Some(x), Some(y)) = (&a.vector, &b.vector) {
        return f64::from(cosine(x, y)).clamp(0.0, 1.0);
    }
    let both = shared(&a.stems, &b.stems);
    let union = a.stems.len() + b.stems.len() - both;
    if union == 0 { 0.0 } else { both as f64 / union as f64 }
}

/// Cosine similarity of two vectors (0 when either is zero or their lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0_f32, 0.0_f32, 0.0_f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(bm25: Option<f64>, text: &str, time: Option<i64>) -> Candidate {
        Candidate { bm25, cosine: None, stems: stems(text).into(), time, vector: None }
    }

    const WEIGHTS: Weights = Weights { vector: 0.7, text: 0.3, half_life_days: 30.0, lambda: 0.7 };

    #[test]
    fn terms_drop_stopwords_repeats_and_single_letters() {
        assert_eq!(terms("What is the Wi-Fi password, the PASSWORD?"), ["wi", "fi", "password"]);
        assert_eq!(fts_query(&terms("tea \"quoted\"")).unwrap(), "\"tea\" OR \"quoted\"");
        assert_eq!(fts_query(&terms("what is it")), None);
    }

    #[test]
    fn a_chunk_with_more_of_the_query_outranks_one_rare_word() {
        let query = stems("garden tomatoes south wall");
        let candidates = [
            candidate(Some(9.0), "the wall", None),
            candidate(Some(6.0), "tomatoes go by the south wall of the garden", None),
        ];
        let ranked = score(&candidates, &query, WEIGHTS, 0);
        assert_eq!(ranked[0].index, 1);
        assert_eq!(ranked[0].matched, 4);
    }

    #[test]
    fn older_memory_scores_less_but_never_below_the_floor() {
        let day = 86_400;
        assert_eq!(decay(None, 1000 * day, 30.0), 1.0);
        assert!((decay(Some(0), 30 * day, 30.0) - 0.9).abs() < 1e-9);
        assert!(decay(Some(0), 3650 * day, 30.0) >= DECAY_FLOOR);
        assert_eq!(decay(Some(0), 3650 * day, 0.0), 1.0, "a half-life of 0 turns decay off");
    }

    #[test]
    fn vectors_weigh_in_when_present() {
        let query = stems("cat");
        let mut semantic = candidate(None, "a small feline", None);
        semantic.cosine = Some(0.9);
        let mut lexical = candidate(Some(1.0), "cat", None);
        lexical.cosine = Some(0.1);
        let ranked = score(&[lexical, semantic], &query, WEIGHTS, 0);
        assert_eq!(ranked[0].index, 1, "0.7·0.9 beats 0.7·0.1 + 0.3·1.0");
    }

    #[test]
    fn mmr_skips_a_near_duplicate_for_something_new() {
        let candidates = [
            candidate(Some(3.0), "sam lives in lyon france", None),
            candidate(Some(2.9), "sam lives in lyon france now", None),
            candidate(Some(2.0), "sam works at the bakery", None),
        ];
        let scored = score(&candidates, &stems("sam lyon bakery"), WEIGHTS, 0);
        let picked: Vec<usize> = mmr(&scored, &candidates, 2, 0.5).iter().map(|s| s.index).collect();
        assert!(picked.contains(&2), "{picked:?}");
        let relevance_only: Vec<usize> = mmr(&scored, &candidates, 2, 1.0).iter().map(|s| s.index).collect();
        assert_eq!(relevance_only, scored.iter().take(2).map(|s| s.index).collect::<Vec<_>>());
    }

    #[test]
    fn cosine_of_mismatched_or_zero_vectors_is_zero() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
    }
}
