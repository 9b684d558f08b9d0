//! The shapes one secret takes in text besides itself, computed once when the secrets are
//! known: its hex, and the parts of its base64 (standard and URL-safe) that stay the same
//! whatever bytes come before and after it in the encoded data; each with its substring
//! finder, and every eight characters of every form in one index for the mask rule.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use memchr::memmem::Finder;

/// Encoded forms shorter than this are not searched for: a handful of base64 characters
/// turns up in ordinary text by chance.
const MIN_FORM_LEN: usize = 8;

/// How much of a secret's start or end must show next to a mask before it is covered.
pub(super) const MIN_SHOWN: usize = 8;

/// The characters an encoded token is made of, so that a match can be widened to the whole
/// token (`Bearer `'s base64, the padding) instead of leaving its edges behind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Alphabet {
    /// `0-9a-fA-F`.
    Hex,
    /// `A-Za-z0-9+/`, padded with `=` or not.
    Base64,
    /// `A-Za-z0-9-_`, padded with `=` or not.
    Base64Url,
}

impl Alphabet {
    /// Whether `byte` is a digit of this alphabet (padding is not).
    pub(super) fn contains(self, byte: u8) -> bool {
        match self {
            Alphabet::Hex => byte.is_ascii_hexdigit(),
            Alphabet::Base64 => byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/'),
            Alphabet::Base64Url => byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'),
        }
    }

    /// Whether `byte` pads the end of a token in this alphabet.
    pub(super) fn pads(self, byte: u8) -> bool {
        byte == b'=' && self != Alphabet::Hex
    }

    /// The 64 digits of a base64 alphabet (`None` for hex).
    fn base64_digits(self) -> Option<&'static [u8; 64]> {
        match self {
            Alphabet::Hex => None,
            Alphabet::Base64 => Some(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
            Alphabet::Base64Url => Some(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        }
    }
}

/// One way a secret can be written.
pub(super) struct Form {
    /// The text to look for, lower-cased where case is ignored.
    pub(super) text: Box<[u8]>,
    /// Whether ASCII case is ignored when comparing (the secret itself, hex), so `text` is
    /// looked for in the lower-cased text; base64 is compared exactly.
    pub(super) fold_case: bool,
    /// The token alphabet a match is widened over; `None` for the secret itself.
    pub(super) run: Option<Alphabet>,
    /// Finds `text`, prepared once.
    pub(super) finder: Finder<'static>,
}

impl Form {
    fn new(text: Vec<u8>, fold_case: bool, run: Option<Alphabet>) -> Form {
        let text: Box<[u8]> = if fold_case { text.to_ascii_lowercase().into() } else { text.into() };
        let finder = Finder::new(&text).into_owned();
        Form { text, fold_case, run, finder }
    }
}

/// A secret and its forms.
pub(super) struct Forms {
    /// The secret as configured.
    pub(super) raw: Box<[u8]>,
    /// The secret itself first, then its hex and its base64 cores.
    pub(super) all: Vec<Form>,
}

impl Forms {
    /// Every form of `secret`.
    pub(super) fn of(secret: &str) -> Forms {
        let raw = secret.as_bytes();
        let mut all =
            vec![Form::new(raw.to_vec(), true, None), Form::new(hex(raw).into_bytes(), true, Some(Alphabet::Hex))];
        for alphabet in [Alphabet::Base64, Alphabet::Base64Url] {
            for offset in 0..3 {
                let core = base64_core(raw, offset, alphabet);
                if core.len() >= MIN_FORM_LEN {
                    all.push(Form::new(core, false, Some(alphabet)));
                }
            }
        }
        Forms { raw: raw.into(), all }
    }
}

/// Where a run of [`MIN_SHOWN`] characters occurs in the forms: (secret, form, offset).
pub(super) type Place = (usize, usize, usize);

/// Every [`MIN_SHOWN`] characters of every form, so the characters beside a mask are looked
/// up once instead of compared with each form.
#[derive(Default)]
pub(super) struct Windows {
    /// Windows of forms compared exactly (base64).
    exact: WindowMap,
    /// Lower-cased windows of forms that ignore case.
    folded: WindowMap,
}

/// Windows (eight bytes read as one number) to the places they occur.
type WindowMap = HashMap<u64, Vec<Place>, BuildHasherDefault<WindowHasher>>;

/// A multiplicative hash for the window numbers: the map is built from configured secrets and
/// only read, so nothing needs SipHash's resistance to chosen keys, and a lookup is one
/// multiplication.
#[derive(Default)]
struct WindowHasher(u64);

impl Hasher for WindowHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Windows {
    /// The index of `secrets`' forms.
    pub(super) fn of(secrets: &[Forms]) -> Windows {
        let mut windows = Windows::default();
        for (secret, forms) in secrets.iter().enumerate() {
            for (index, form) in forms.all.iter().enumerate() {
                let map = if form.fold_case { &mut windows.folded } else { &mut windows.exact };
                for (offset, window) in form.text.windows(MIN_SHOWN).enumerate() {
                    let Ok(window) = <[u8; MIN_SHOWN]>::try_from(window) else { continue };
                    map.entry(u64::from_le_bytes(window)).or_default().push((secret, index, offset));
                }
            }
        }
        windows
    }

    /// The places of forms that `window` (of the text) may be part of.
    pub(super) fn lookup(&self, window: &[u8; MIN_SHOWN]) -> impl Iterator<Item = Place> + '_ {
        let mut lower = *window;
        lower.make_ascii_lowercase();
        let exact = self.exact.get(&u64::from_le_bytes(*window)).into_iter().flatten();
        let folded = self.folded.get(&u64::from_le_bytes(lower)).into_iter().flatten();
        exact.chain(folded).copied()
    }
}

/// `bytes` in lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The base64 characters that encode `secret` alone when it starts `offset` bytes (mod 3)
/// into the encoded data (`Bearer <key>` puts the key at 7, `user:<key>` at 5): the secret's
/// bytes from the first 3-byte group boundary to the last, whose characters depend on
/// nothing else. At most two bytes at either end are left out.
fn base64_core(secret: &[u8], offset: usize, alphabet: Alphabet) -> Vec<u8> {
    let skip = (3 - offset % 3) % 3;
    let rest = secret.get(skip..).unwrap_or_default();
    let whole_groups = &rest[..rest.len() / 3 * 3];
    alphabet.base64_digits().map(|digits| base64(whole_groups, digits)).unwrap_or_default()
}

/// `bytes` in base64 with `digits`, unpadded.
fn base64(bytes: &[u8], digits: &[u8; 64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let word = group.iter().enumerate().fold(0u32, |word, (i, &byte)| word | (u32::from(byte) << (16 - 8 * i)));
        for i in 0..=group.len() {
            out.push(digits[((word >> (18 - 6 * i)) & 0x3f) as usize]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    #[test]
    fn base64_matches_the_rfc_4648_test_vectors() {
        let vectors =
            [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("foobar", "Zm9vYmFy")];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes(), STANDARD), encoded.as_bytes(), "{plain}");
        }
    }

    #[test]
    fn each_core_is_inside_the_base64_of_the_key_behind_a_prefix_of_that_length() {
        // Computed with Python's `base64.b64encode`.
        let key = "sk-Oxi/Test+Key=0123456789abcdef~GHIJ";
        let encoded = [
            "c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ+R0hJSg==",
            "QmVhcmVyIHNrLU94aS9UZXN0K0tleT0wMTIzNDU2Nzg5YWJjZGVmfkdISUo=",
            "dXNlcjpzay1PeGkvVGVzdCtLZXk9MDEyMzQ1Njc4OWFiY2RlZn5HSElK",
        ];
        for (offset, encoded) in [(0, encoded[0]), (7, encoded[1]), (5, encoded[2])] {
            let core = String::from_utf8(base64_core(key.as_bytes(), offset, Alphabet::Base64)).unwrap();
            assert!(core.len() >= 44, "at most two bytes of the key are left out: {core}");
            assert!(encoded.contains(&core), "offset {offset}: {core} not in {encoded}");
        }
    }

    #[test]
    fn short_cores_are_not_searched_for() {
        let forms = Forms::of("abcdefg");
        let cores: Vec<_> =
            forms.all.iter().filter(|f| !f.fold_case).map(|f| String::from_utf8_lossy(&f.text).into_owned()).collect();
        assert!(cores.iter().all(|core| core.len() >= MIN_FORM_LEN), "{cores:?}");
        assert_eq!(cores.len(), 4, "a key shifted by one byte leaves too short a core: {cores:?}");
    }
}
