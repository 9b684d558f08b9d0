//! Saving a download into a file with a size limit. The channel fetches the file from its
//! service and hands over the body as a stream of chunks; a body over the limit, a transfer
//! that breaks off or a failed write leaves no partial file behind.

use std::path::Path;

use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;

/// Why a download was not saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError<E> {
    /// The body is (or says it is) larger than the limit.
    #[error("the file is larger than {max} bytes")]
    TooLarge {
        /// The limit, in bytes.
        max: u64,
    },
    /// Reading the body failed (the channel's own error, e.g. the HTTP client's).
    #[error("{0}")]
    Source(E),
    /// The file could not be created or written.
    #[error("{0}")]
    File(std::io::Error),
}

/// Writes `chunks` into a new file at `dest`, at most `max` bytes; a body whose `declared`
/// length is over the limit is refused before the file is created. Returns the bytes written.
pub async fn save_limited<S, B, E>(
    mut chunks: S,
    dest: &Path,
    max: u64,
    declared: Option<u64>,
) -> Result<u64, SaveError<E>>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    if declared.is_some_and(|length| length > max) {
        return Err(SaveError::TooLarge { max });
    }
    let mut file = tokio::fs::File::create(dest).await.map_err(SaveError::File)?;
    let outcome = async {
        let mut written = 0u64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(SaveError::Source)?;
            written += chunk.as_ref().len() as u64;
            if written > max {
                return Err(SaveError::TooLarge { max });
            }
            file.write_all(chunk.as_ref()).await.map_err(SaveError::File)?;
        }
        file.flush().await.map_err(SaveError::File)?;
        Ok(written)
    }
    .await;
    if outcome.is_err() {
        drop(file);
        let _ = tokio::fs::remove_file(dest).await;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;

    fn dest(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-sdk-download-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("file.bin")
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_written_whole() {
        let path = dest("whole");
        let chunks = stream::iter(vec![Ok::<_, String>(b"hello ".to_vec()), Ok(b"world".to_vec())]);
        assert_eq!(save_limited(chunks, &path, 64, Some(11)).await.unwrap(), 11);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello world");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_or_broken_off_leaves_no_file() {
        let path = dest("over");
        let chunks = stream::iter(vec![Ok::<_, String>(vec![0u8; 8]), Ok(vec![0u8; 8])]);
        assert!(matches!(save_limited(chunks, &path, 10, None).await, Err(SaveError::TooLarge { max: 10 })));
        assert!(!path.exists());
        let chunks = stream::iter(vec![Ok(vec![1u8; 4]), Err("reset by peer".to_owned())]);
        assert!(matches!(save_limited(chunks, &path, 10, None).await, Err(SaveError::Source(_))));
        assert!(!path.exists());
        let declared = stream::iter(Vec::<Result<Vec<u8>, String>>::new());
        assert!(matches!(save_limited(declared, &path, 10, Some(11)).await, Err(SaveError::TooLarge { .. })));
        assert!(!path.exists(), "refused before the file was created");
    }
}
