//! A compact byte-pair tokenizer that counts `cl100k_base` tokens. The vocabulary is compiled
//! into the binary (every token's bytes in rank order and each one's length, written by
//! `build.rs`; read-only pages, paged in as used) and the only heap it needs is one
//! open-addressing table of 1 MiB, where a general tokenizer builds maps of 100,000 small
//! allocations each way (about 24 MiB resident).
//!
//! The table holds where each token is in the bytes (its start and length in one `u32`), not
//! its rank: tokens are stored in rank order, so of two tokens the one that starts first has
//! the lower rank, which is all that merging asks of ranks. Lengths of one byte each instead of
//! a start of four per token keep 0.3 MB out of the executable.
//!
//! Counting is the same as tiktoken's `encode_with_special_tokens(text).len()`: the special
//! tokens count one each, the text between them is split by the `cl100k_base` pattern, and
//! each piece is merged pair by pair, the pair of lowest rank first. A unit test holds the
//! counts equal to tiktoken's over mixed texts.

use std::borrow::Cow;

use fancy_regex::Regex;

/// Every `cl100k_base` token's bytes, one after another in rank order (see `build.rs`).
static CL100K_TOKENS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_tokens.bin"));
/// The length of each token in [`CL100K_TOKENS`], one byte each, in rank order.
static CL100K_LENGTHS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_lengths.bin"));

/// The `cl100k_base` split pattern (contractions, words, numbers of up to three digits,
/// punctuation runs, newlines, other whitespace).
const PATTERN: &str = concat!(
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+",
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
);

/// Texts that are one token each wherever they appear.
const SPECIAL_TOKENS: [&str; 5] =
    ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"];

/// No token: the marker of an empty table slot and of a pair that is not a token.
const NONE: u32 = u32::MAX;

/// A place (see [`place`]) has 8 bits of length under the start, so bytes end below 16 MiB.
const MAX_BYTES: usize = 1 << 24;

/// Why the tokenizer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BpeError {
    /// The split pattern did not compile.
    #[error("the cl100k_base split pattern did not compile: {0}")]
    Pattern(#[from] Box<fancy_regex::Error>),
    /// A token is longer than 255 bytes or all of them 16 MiB or more.
    #[error("a vocabulary of {tokens} tokens in {bytes} bytes does not fit (at most 255 bytes a token, 16 MiB in all)")]
    TooLarge {
        /// How many tokens it has.
        tokens: usize,
        /// Their bytes in all.
        bytes: usize,
    },
    /// The lengths add up to more bytes than there are.
    #[error("the vocabulary's lengths run past its {bytes} bytes")]
    Truncated {
        /// The bytes there are.
        bytes: usize,
    },
}

/// The `cl100k_base` vocabulary in compact form, and the pattern that splits text into pieces.
pub struct CompactBpe {
    /// Every token's bytes, one after another in rank order.
    bytes: Cow<'static, [u8]>,
    /// Each token's length in `bytes`, in rank order; read to fill `slots`, and for [`CompactBpe::len`].
    lengths: Cow<'static, [u8]>,
    /// Open addressing by the hash of a token's bytes: the token's place, or [`NONE`].
    slots: Vec<u32>,
    splitter: Regex,
}

impl CompactBpe {
    /// The tokenizer of the vocabulary compiled into the binary.
    pub fn cl100k() -> Result<CompactBpe, BpeError> {
        CompactBpe::new(Cow::Borrowed(CL100K_TOKENS), Cow::Borrowed(CL100K_LENGTHS))
    }

    /// A tokenizer of `tokens` (each token's bytes, in rank order).
    pub fn from_tokens(tokens: &[Vec<u8>]) -> Result<CompactBpe, BpeError> {
        let bytes: Vec<u8> = tokens.concat();
        let too_large = || BpeError::TooLarge { tokens: tokens.len(), bytes: bytes.len() };
        let lengths = tokens
            .iter()
            .map(|token| u8::try_from(token.len()).map_err(|_| too_large()))
            .collect::<Result<Vec<u8>, _>>()?;
        CompactBpe::new(Cow::Owned(bytes), Cow::Owned(lengths))
    }

    fn new(bytes: Cow<'static, [u8]>, lengths: Cow<'static, [u8]>) -> Result<CompactBpe, BpeError> {
        if bytes.len() >= MAX_BYTES {
            return Err(BpeError::TooLarge { tokens: lengths.len(), bytes: bytes.len() });
        }
        let splitter = Regex::new(PATTERN).map_err(Box::new)?;
        let mut slots = vec![NONE; (lengths.len() * 2).next_power_of_two().max(2)];
        let mask = slots.len() - 1;
        let mut start = 0;
        for &length in lengths.iter() {
            let end = start + usize::from(length);
            let Some(token) = bytes.get(start..end) else {
                return Err(BpeError::Truncated { bytes: bytes.len() });
            };
            let mut slot = hash(token) & mask;
            while slots[slot] != NONE {
                slot = (slot + 1) & mask;
            }
            slots[slot] = place(start, length);
            start = end;
        }
        Ok(CompactBpe { bytes, lengths, slots, splitter })
    }

    /// Bytes this tokenizer holds on the heap, its compiled pattern aside.
    pub fn heap_bytes(&self) -> usize {
        let owned = |data: &Cow<'static, [u8]>| if let Cow::Owned(data) = data { data.capacity() } else { 0 };
        owned(&self.bytes) + owned(&self.lengths) + 4 * self.slots.capacity()
    }

    /// How many tokens the vocabulary has.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether the vocabulary has no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tokens of `text`, special tokens counting one each; `None` when the pattern gave
    /// up on some piece (its backtracking limit), so the caller can fall back to a bound.
    pub fn count(&self, text: &str) -> Option<usize> {
        let mut total = 0;
        let mut rest = text;
        while let Some((at, special)) = next_special(rest) {
            total += self.count_ordinary(&rest[..at])? + 1;
            rest = &rest[at + special.len()..];
        }
        Some(total + self.count_ordinary(rest)?)
    }

    /// The tokens of text with no special token in it.
    fn count_ordinary(&self, text: &str) -> Option<usize> {
        let mut total = 0;
        for piece in self.splitter.find_iter(text) {
            total += self.piece_tokens(piece.ok()?.as_str().as_bytes());
        }
        Some(total)
    }

    /// How many tokens one piece merges into: adjacent parts are joined, the pair whose
    /// joined bytes have the lowest rank first (the leftmost of equals), until no adjacent
    /// pair is a token. Places stand in for ranks: they are ordered alike.
    fn piece_tokens(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.place_of(piece) != NONE {
            return piece.len().min(1);
        }
        // `bounds[i]..bounds[i + 1]` is part `i`; `joined[i]` the place of parts `i` and `i + 1`.
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        let mut joined: Vec<u32> = (0..piece.len()).map(|i| self.pair_place(piece, &bounds, i)).collect();
        let lowest = |joined: &[u32]| {
            let (best, &place) = joined.iter().enumerate().min_by_key(|(_, place)| **place)?;
            (place != NONE).then_some(best)
        };
        while let Some(best) = lowest(&joined) {
            bounds.remove(best + 1);
            joined.remove(best + 1);
            joined[best] = self.pair_place(piece, &bounds, best);
            if best > 0 {
                joined[best - 1] = self.pair_place(piece, &bounds, best - 1);
            }
        }
        bounds.len() - 1
    }

    /// The place of parts `i` and `i + 1` of `piece` joined, or [`NONE`].
    fn pair_place(&self, piece: &[u8], bounds: &[usize], i: usize) -> u32 {
        match bounds.get(i + 2) {
            Some(&end) => self.place_of(&piece[bounds[i]..end]),
            None => NONE,
        }
    }

    /// The place of the token whose bytes are `token`, or [`NONE`].
    fn place_of(&self, token: &[u8]) -> u32 {
        let mask = self.slots.len() - 1;
        let mut slot = hash(token) & mask;
        loop {
            let place = self.slots[slot];
            if place == NONE || self.token(place) == token {
                return place;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The bytes of the token at `place`.
    fn token(&self, place: u32) -> &[u8] {
        let (start, length) = ((place >> 8) as usize, (place & 0xff) as usize);
        &self.bytes[start..start + length]
    }
}

/// Where a token is: its start in the bytes above its length (8 bits). Tokens lie in rank
/// order, so places compare as ranks do; `start` is below [`MAX_BYTES`], so no place is [`NONE`].
fn place(start: usize, length: u8) -> u32 {
    ((start as u32) << 8) | u32::from(length)
}

/// Where the first special token in `text` starts, and which it is.
fn next_special(text: &str) -> Option<(usize, &'static str)> {
    if !text.contains("<|") {
        return None;
    }
    SPECIAL_TOKENS.iter().filter_map(|special| text.find(special).map(|at| (at, *special))).min_by_key(|(at, _)| *at)
}

/// FNV-1a over the bytes: quick, and spreads the short tokens of a BPE vocabulary well.
fn hash(bytes: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash as usize
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn texts() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            "hello",
            "Hello, world! How's it going? I'd say we'll see; they've gone, you're right.",
            "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
            "12345678901234567890 3.14159 1,000,000 0x1F -42",
            "   leading spaces, trailing spaces   \n\n\n\tand tabs\t\t\r\n",
            "Grüße aus Köln — naïve café, Ελληνικά, русский текст, עברית, العربية",
            "日本語のテキストと中文文本，还有한국어 텍스트。",
            "emoji 🙂🙃🎉👩‍👩‍👧‍👦 and flags 🇩🇪🇯🇵",
            "<|endoftext|>a<|fim_prefix|>b<|fim_middle|>c<|fim_suffix|><|endofprompt|> <|not special|>",
            "{\"role\": \"tool\", \"content\": \"{\\\"path\\\": \\\"/tmp/x\\\", \\\"ok\\\": true}\"}",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "https://example.com/path?query=1&other=two#fragment user@example.org",
            "ZXhhbXBsZSBiYXNlNjQgdGV4dCB0aGF0IGdvZXMgb24gYW5kIG9u",
        ]
        .iter()
        .map(|text| (*text).to_owned())
        .collect();
        texts.push("word ".repeat(500));
        texts.push("x\n".repeat(300) + "   \n  ");
        texts
    }

    #[test]
    fn it_counts_exactly_what_tiktoken_counts_for_cl100k_base() {
        let compact = CompactBpe::cl100k().unwrap();
        let reference = tiktoken_rs::cl100k_base_singleton();
        for text in texts() {
            let expected = reference.encode_with_special_tokens(&text).len();
            assert_eq!(compact.count(&text), Some(expected), "{text:?}");
        }
    }

    #[test]
    fn its_vocabulary_is_all_of_cl100k_base_and_needs_one_mebibyte_of_heap() {
        let compact = CompactBpe::cl100k().unwrap();
        assert_eq!(compact.len(), 100_256, "every rank of cl100k_base");
        assert_eq!(compact.heap_bytes(), 1 << 20);
    }

    #[test]
    fn a_piece_merges_the_lowest_ranked_pair_first() {
        // Ranks: a=0 b=1 c=2 "bc"=3 "ab"=4 "abcd"=5. In "abc", "bc" joins before "ab", and
        // "a" + "bc" is no token: two tokens. "abcd" is one whole token.
        let tokens: Vec<Vec<u8>> = ["a", "b", "c", "bc", "ab", "abcd"].iter().map(|t| t.as_bytes().to_vec()).collect();
        let bpe = CompactBpe::from_tokens(&tokens).unwrap();
        assert_eq!(bpe.piece_tokens(b"abc"), 2);
        assert_eq!(bpe.piece_tokens(b"abab"), 2);
        assert_eq!(bpe.piece_tokens(b"abcd"), 1);
        assert_eq!(bpe.piece_tokens(b""), 0);
    }

    #[test]
    fn a_token_longer_than_255_bytes_is_refused() {
        let tokens = vec![b"a".to_vec(), vec![b'b'; 256]];
        assert!(matches!(CompactBpe::from_tokens(&tokens), Err(BpeError::TooLarge { tokens: 2, bytes: 257 })));
    }
}
