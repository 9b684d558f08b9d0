//! `MemoryIndex`: the SQLite file that makes memory searchable — chunks of the memory files
//! with an FTS5 table for BM25 and an optional f32 vector per chunk (cosine computed here,
//! no SQLite extension). Derived from the files and rebuilt from them at will.
//!
//! Sync is incremental: a file whose modification time and size are unchanged is skipped, a
//! Markdown file whose content hash is unchanged only has its time updated, and
//! `history.jsonl` grown by appends (the bytes before the old end unchanged) has only its new
//! lines read. Anything else re-chunks the file; vectors of chunks whose id (a hash of their
//! text) survives are kept, so an edit re-embeds only what changed.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use rusqlite::{Connection, OptionalExtension, params};

use super::rank::{self, Candidate, Weights};
use super::sources::{self, Category, Chunk, Format, SourceFile};

/// Bytes before a file's old end compared to tell an append from a rewrite.
const TAIL_BYTES: u64 = 4096;
/// Candidates taken from each of the keyword and vector searches before ranking.
const CANDIDATES: usize = 60;
/// Most chunks kept read between searches (see [`ChunkCache`]): a few searches' candidates, a
/// few hundred KiB at most.
const CACHED_CHUNKS: usize = 512;

/// The index could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// SQLite failed.
    #[error("memory index {}: {source}", path.display())]
    Sqlite {
        /// The index file.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// A file could not be read or the index directory created.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One chunk found, with where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Stable id.
    pub id: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// Its category.
    pub category: Category,
    /// First line in the file (1-based).
    pub start_line: usize,
    /// Last line (inclusive).
    pub end_line: usize,
    /// History cursor, for history entries.
    pub cursor: Option<u64>,
    /// When it was written (seconds since the epoch), if dated.
    pub time: Option<i64>,
    /// The heading above it (Markdown) or the entry's timestamp (history).
    pub context: String,
    /// The text.
    pub text: String,
    /// Final score in `[0, 1]` (0 for lookups that do not rank).
    pub score: f64,
    /// Query terms it contains.
    pub matched: usize,
}

impl Hit {
    /// `memory/MEMORY.md:3-4` or `memory/history.jsonl:12 (cursor 12)`.
    pub fn location(&self) -> String {
        let lines = if self.start_line == self.end_line {
            self.start_line.to_string()
        } else {
            format!("{}-{}", self.start_line, self.end_line)
        };
        match self.cursor {
            Some(cursor) => format!("{}:{lines} (cursor {cursor})", self.path),
            None => format!("{}:{lines}", self.path),
        }
    }

    /// `YYYY-MM-DD` of dated memory.
    pub fn day(&self) -> Option<String> {
        let time = chrono::DateTime::from_timestamp(self.time?, 0)?;
        Some(time.format("%Y-%m-%d").to_string())
    }
}

/// What a search asks.
#[derive(Debug, Clone)]
pub struct Query<'a> {
    /// The words searched for.
    pub text: &'a str,
    /// The query's embedding, when embeddings are on.
    pub vector: Option<&'a [f32]>,
    /// Most hits.
    pub limit: usize,
    /// Only this category.
    pub category: Option<Category>,
    /// Score weights, decay and diversity.
    pub weights: Weights,
    /// Now, in seconds since the epoch (for decay).
    pub now: i64,
}

/// What a sync changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Files read again.
    pub files_read: usize,
    /// Chunks added.
    pub added: usize,
    /// Chunks removed.
    pub removed: usize,
}

impl SyncReport {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        self.added + self.removed > 0
    }
}

/// Sizes for `oxibot status` and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Chunks indexed.
    pub chunks: usize,
    /// Chunks with a vector.
    pub embedded: usize,
    /// Files indexed.
    pub files: usize,
    /// Bytes of the database file.
    pub bytes: u64,
}

/// A file's state when it was last indexed.
struct FileState {
    mtime: i64,
    size: u64,
    hash: String,
    lines: usize,
    tail: String,
}

/// Vectors held in memory for cosine search, reloaded when the index's generation changes.
#[derive(Default)]
struct VectorCache {
    generation: Option<i64>,
    rows: Vec<(i64, Vec<f32>)>,
    by_row: HashMap<i64, usize>,
}

/// Chunks a search read and stemmed, kept until the index changes: auto-recall searches every
/// user message, and the same chunks (the newest, or those matching a common word) come back
/// as candidates search after search, so reading and stemming them each time cost a turn more
/// the more the archive held. Emptied when the index's generation moves, or before it would
/// hold more than [`CACHED_CHUNKS`].
#[derive(Default)]
struct ChunkCache {
    /// The index's generation the chunks were read at.
    generation: Option<i64>,
    /// By row id.
    chunks: HashMap<i64, CachedChunk>,
}

/// One chunk as ranking needs it.
struct CachedChunk {
    /// The chunk (score and matched terms not set).
    hit: Hit,
    /// The stems of its heading and text ([`rank::stems`]).
    stems: Arc<[u64]>,
}

/// One connection to one workspace's index.
pub struct MemoryIndex {
    conn: Connection,
    path: PathBuf,
    vectors: VectorCache,
    chunks: ChunkCache,
    /// Chunks read from the database for ranking so far (tests check the cache with it).
    chunks_read: u64,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, mtime INTEGER NOT NULL, size INTEGER NOT NULL,
    hash TEXT NOT NULL, lines INTEGER NOT NULL, tail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks(
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, path TEXT NOT NULL, category TEXT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, cursor INTEGER, time INTEGER,
    context TEXT NOT NULL, text TEXT NOT NULL, vec BLOB);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, context, content='chunks', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, context) VALUES (new.rowid, new.text, new.context);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, context) VALUES ('delete', old.rowid, old.text, old.context);
END;
";

const HIT_COLUMNS: &str = "rowid, id, path, category, start_line, end_line, cursor, time, context, text";

impl MemoryIndex {
    /// Where the index of `workspace` lives: `<data dir>/memory-index/<workspace id>.sqlite`.
    pub fn location(data_dir: &Path, workspace: &Path) -> PathBuf {
        data_dir.join("memory-index").join(format!("{}.sqlite", crate::session::location::workspace_id(workspace)))
    }

    /// Opens (creating when missing) the index at `path`.
    pub fn open(path: &Path) -> Result<MemoryIndex, IndexError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|source| IndexError::Io {
                action: "create",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let sqlite = |source| IndexError::Sqlite { path: path.to_path_buf(), source };
        let conn = Connection::open(path).map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(sqlite)?;
        // Plans that do not depend on bound values: otherwise every search, whose MATCH text
        // differs from the last, compiles its cached statement again before running it.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        Ok(MemoryIndex {
            conn,
            path: path.to_path_buf(),
            vectors: VectorCache::default(),
            chunks: ChunkCache::default(),
            chunks_read: 0,
        })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many chunks searches on this connection have read from the database for ranking:
    /// a chunk read once is not read again until the index changes.
    pub fn chunks_read(&self) -> u64 {
        self.chunks_read
    }

    fn sqlite(&self, source: rusqlite::Error) -> IndexError {
        IndexError::Sqlite { path: self.path.clone(), source }
    }

    /// Brings the index up to date with the memory files of `workspace`.
    pub fn sync(&mut self, workspace: &Path) -> Result<SyncReport, IndexError> {
        let sources = sources::list_sources(workspace);
        let known = self.file_states()?;
        let mut report = SyncReport::default();
        let tx = self.conn.transaction().map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        let path = self.path.clone();
        let sqlite = |source| IndexError::Sqlite { path: path.clone(), source };
        for source in &sources {
            sync_file(&tx, source, known.get(&source.path), &mut report).map_err(|e| match e {
                SyncError::Sqlite(source) => sqlite(source),
                SyncError::Io(error) => IndexError::Io { action: "read", path: source.absolute.clone(), source: error },
            })?;
        }
        let present: HashSet<&str> = sources.iter().map(|s| s.path.as_str()).collect();
        for gone in known.keys().filter(|p| !present.contains(p.as_str())) {
            report.removed += tx.execute("DELETE FROM chunks WHERE path = ?1", [gone]).map_err(sqlite)?;
            tx.execute("DELETE FROM files WHERE path = ?1", [gone]).map_err(sqlite)?;
        }
        if report.changed() {
            bump_generation(&tx).map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        Ok(report)
    }

    fn file_states(&self) -> Result<HashMap<String, FileState>, IndexError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT path, mtime, size, hash, lines, tail FROM files")
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    FileState {
                        mtime: row.get(1)?,
                        size: row.get::<_, i64>(2)?.max(0) as u64,
                        hash: row.get(3)?,
                        lines: row.get::<_, i64>(4)?.max(0) as usize,
                        tail: row.get(5)?,
                    },
                ))
            })
            .and_then(Iterator::collect::<Result<HashMap<_, _>, _>>);
        rows.map_err(|e| self.sqlite(e))
    }

    /// Drops every vector when the embedding model is not `model` (vectors of two models
    /// cannot be compared), and records `model`.
    pub fn use_model(&mut self, model: Option<&str>) -> Result<(), IndexError> {
        let current: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'model'", [], |row| row.get(0))
            .optional()
            .map_err(|e| self.sqlite(e))?;
        if current.as_deref() == model {
            return Ok(());
        }
        let tx = self.conn.transaction().map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        let run = || -> rusqlite::Result<()> {
            tx.execute("UPDATE chunks SET vec = NULL WHERE vec IS NOT NULL", [])?;
            match model {
                Some(model) => tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('model', ?1)", [model])?,
                None => tx.execute("DELETE FROM meta WHERE key = 'model'", [])?,
            };
            bump_generation(&tx)
        };
        run().map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// Up to `limit` chunks without a vector: (row, text to embed).
    pub fn missing_vectors(&self, limit: usize) -> Result<Vec<(i64, String)>, IndexError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT rowid, context, text FROM chunks WHERE vec IS NULL ORDER BY rowid LIMIT ?1")
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                let context: String = row.get(1)?;
                let text: String = row.get(2)?;
                Ok((row.get(0)?, embedding_input(&context, &text)))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>);
        rows.map_err(|e| self.sqlite(e))
    }

    /// Stores vectors for rows (rows deleted meanwhile are skipped).
    pub fn store_vectors(&mut self, vectors: &[(i64, Vec<f32>)]) -> Result<(), IndexError> {
        let tx = self.conn.transaction().map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        let run = || -> rusqlite::Result<()> {
            {
                let mut update = tx.prepare_cached("UPDATE chunks SET vec = ?2 WHERE rowid = ?1")?;
                for (row, vector) in vectors {
                    update.execute(params![row, to_blob(vector)])?;
                }
            }
            bump_generation(&tx)
        };
        run().map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// The best chunks for `query`: keyword and vector candidates, scored, decayed, and
    /// picked for diversity.
    pub fn search(&mut self, query: &Query<'_>) -> Result<Vec<Hit>, IndexError> {
        let terms = rank::terms(query.text);
        let mut found: HashMap<i64, (Option<f64>, Option<f64>)> = HashMap::new();
        let wanted = if query.category.is_some() { CANDIDATES * 4 } else { CANDIDATES };
        if let Some(fts) = rank::fts_query(&terms) {
            for (row, bm25) in self.keyword_candidates(&fts, wanted)? {
                found.entry(row).or_default().0 = Some(bm25.max(0.0));
            }
        }
        if let Some(vector) = query.vector {
            self.load_vectors()?;
            let mut similar: Vec<(i64, f32)> =
                self.vectors.rows.iter().map(|(row, v)| (*row, rank::cosine(vector, v))).collect();
            similar.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (row, _) in similar.into_iter().take(wanted) {
                found.entry(row).or_default();
            }
            for (row, scores) in &mut found {
                if let Some(&at) = self.vectors.by_row.get(row) {
                    scores.1 = Some(f64::from(rank::cosine(vector, &self.vectors.rows[at].1)));
                }
            }
        }
        if found.is_empty() {
            return Ok(Vec::new());
        }
        // In row order, the order the database gives them in: candidates tied on score keep it.
        let mut rows: Vec<i64> = found.keys().copied().collect();
        rows.sort_unstable();
        self.read_chunks(&rows)?;
        let chunks: Vec<(i64, &CachedChunk)> = rows
            .iter()
            .filter_map(|row| Some((*row, self.chunks.chunks.get(row)?)))
            .filter(|(_, chunk)| query.category.is_none_or(|c| c == chunk.hit.category))
            .collect();
        let candidates: Vec<Candidate> = chunks
            .iter()
            .map(|(row, chunk)| {
                let (bm25, cosine) = found.get(row).copied().unwrap_or_default();
                let vector = self.vectors.by_row.get(row).map(|&at| self.vectors.rows[at].1.clone());
                Candidate {
                    bm25,
                    cosine: cosine.filter(|_| query.vector.is_some()),
                    stems: Arc::clone(&chunk.stems),
                    time: chunk.hit.time,
                    vector: vector.filter(|_| query.vector.is_some()),
                }
            })
            .collect();
        let query_stems = rank::stems(&terms.join(" "));
        let scored = rank::score(&candidates, &query_stems, query.weights, query.now);
        let picked = rank::mmr(&scored, &candidates, query.limit, query.weights.lambda);
        Ok(picked
            .into_iter()
            .map(|s| {
                let mut hit = chunks[s.index].1.hit.clone();
                hit.score = s.score;
                hit.matched = s.matched;
                hit
            })
            .collect())
    }

    /// The best `wanted` rows for the FTS5 query `fts`, with their BM25 relevance (larger is
    /// better). Every match is scored to find them, once each: the score is named so that
    /// ordering by it does not call `bm25` a second time per match.
    fn keyword_candidates(&self, fts: &str, wanted: usize) -> Result<Vec<(i64, f64)>, IndexError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT rowid, bm25(chunks_fts, 1.0, 0.3) AS score FROM chunks_fts WHERE chunks_fts MATCH ?1 \
                 ORDER BY score LIMIT ?2",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map(params![fts, wanted as i64], |row| Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>);
        rows.map_err(|e| self.sqlite(e))
    }

    /// Brings the chunks at `rows` into the cache, reading only those it lacks; the cache is
    /// emptied first when the index changed since it was filled, or when it would outgrow
    /// [`CACHED_CHUNKS`].
    fn read_chunks(&mut self, rows: &[i64]) -> Result<(), IndexError> {
        let generation = generation(&self.conn).map_err(|e| self.sqlite(e))?;
        if self.chunks.generation != Some(generation) {
            self.chunks = ChunkCache { generation: Some(generation), chunks: HashMap::new() };
        }
        let mut missing: Vec<i64> = rows.iter().copied().filter(|row| !self.chunks.chunks.contains_key(row)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        if self.chunks.chunks.len() + missing.len() > CACHED_CHUNKS {
            self.chunks.chunks.clear();
            missing = rows.to_vec();
        }
        let read = self.rows(&missing)?;
        self.chunks_read += read.len() as u64;
        for (row, hit) in read {
            let stems = rank::stems(&format!("{} {}", hit.context, hit.text)).into();
            self.chunks.chunks.insert(row, CachedChunk { hit, stems });
        }
        Ok(())
    }

    /// Reloads the vectors when the index changed since they were loaded.
    fn load_vectors(&mut self) -> Result<(), IndexError> {
        let generation = generation(&self.conn).map_err(|e| self.sqlite(e))?;
        if self.vectors.generation == Some(generation) {
            return Ok(());
        }
        let mut statement = self
            .conn
            .prepare_cached("SELECT rowid, vec FROM chunks WHERE vec IS NOT NULL")
            .map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        let rows: Vec<(i64, Vec<f32>)> = statement
            .query_map([], |row| Ok((row.get(0)?, from_blob(&row.get::<_, Vec<u8>>(1)?))))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| IndexError::Sqlite { path: self.path.clone(), source: e })?;
        drop(statement);
        let by_row = rows.iter().enumerate().map(|(at, (row, _))| (*row, at)).collect();
        self.vectors = VectorCache { generation: Some(generation), rows, by_row };
        Ok(())
    }

    /// The chunks at `rows`, with their row ids.
    fn rows(&self, rows: &[i64]) -> Result<Vec<(i64, Hit)>, IndexError> {
        let list: Vec<String> = rows.iter().map(i64::to_string).collect();
        let sql = format!("SELECT {HIT_COLUMNS} FROM chunks WHERE rowid IN ({})", list.join(","));
        self.query_hits(&sql, [])
    }

    fn query_hits<P: rusqlite::Params>(&self, sql: &str, params: P) -> Result<Vec<(i64, Hit)>, IndexError> {
        let mut statement = self.conn.prepare_cached(sql).map_err(|e| self.sqlite(e))?;
        let rows = statement.query_map(params, read_hit).and_then(Iterator::collect::<Result<Vec<_>, _>>);
        rows.map_err(|e| self.sqlite(e))
    }

    /// The chunk with id `id`.
    pub fn get(&self, id: &str) -> Result<Option<Hit>, IndexError> {
        let sql = format!("SELECT {HIT_COLUMNS} FROM chunks WHERE id = ?1");
        Ok(self.query_hits(&sql, [id.trim()])?.into_iter().next().map(|(_, hit)| hit))
    }

    /// The newest chunks (dated ones by date, then by file and line), of `category` if given.
    pub fn list(&self, category: Option<Category>, limit: usize) -> Result<Vec<Hit>, IndexError> {
        let sql = format!(
            "SELECT {HIT_COLUMNS} FROM chunks WHERE (?1 IS NULL OR category = ?1) \
             ORDER BY COALESCE(time, 9223372036854775807) DESC, path, start_line DESC LIMIT ?2"
        );
        let hits = self.query_hits(&sql, params![category.map(Category::as_str), limit as i64])?;
        Ok(hits.into_iter().map(|(_, hit)| hit).collect())
    }

    /// How many chunks each category holds.
    pub fn count(&self) -> Result<Vec<(Category, usize)>, IndexError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT category, COUNT(*) FROM chunks GROUP BY category")
            .map_err(|e| self.sqlite(e))?;
        let counted: HashMap<String, i64> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect::<Result<HashMap<_, _>, _>>)
            .map_err(|e| self.sqlite(e))?;
        Ok(Category::ALL
            .into_iter()
            .map(|c| (c, counted.get(c.as_str()).copied().unwrap_or(0).max(0) as usize))
            .collect())
    }

    /// Chunk, vector, file and byte counts.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        let count = |sql: &str| -> Result<usize, IndexError> {
            self.conn
                .query_row(sql, [], |row| row.get::<_, i64>(0))
                .map(|n| n.max(0) as usize)
                .map_err(|e| self.sqlite(e))
        };
        let bytes = fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
            + fs::metadata(self.path.with_extension("sqlite-wal")).map(|m| m.len()).unwrap_or(0);
        Ok(IndexStats {
            chunks: count("SELECT COUNT(*) FROM chunks")?,
            embedded: count("SELECT COUNT(*) FROM chunks WHERE vec IS NOT NULL")?,
            files: count("SELECT COUNT(*) FROM files")?,
            bytes,
        })
    }

    /// Folds the write-ahead log into the database file (for an honest size).
    pub fn checkpoint(&self) -> Result<(), IndexError> {
        self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").map_err(|e| self.sqlite(e))
    }
}

fn read_hit(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Hit)> {
    let category: String = row.get(3)?;
    Ok((
        row.get(0)?,
        Hit {
            id: row.get(1)?,
            path: row.get(2)?,
            category: Category::parse(&category).unwrap_or(Category::Core),
            start_line: row.get::<_, i64>(4)?.max(0) as usize,
            end_line: row.get::<_, i64>(5)?.max(0) as usize,
            cursor: row.get::<_, Option<i64>>(6)?.map(|c| c.max(0) as u64),
            time: row.get(7)?,
            context: row.get(8)?,
            text: row.get(9)?,
            score: 0.0,
            matched: 0,
        },
    ))
}

/// What is embedded for a chunk: its heading (or timestamp) and its text.
fn embedding_input(context: &str, text: &str) -> String {
    if context.is_empty() { text.to_owned() } else { format!("{context}\n{text}") }
}

fn generation(conn: &Connection) -> rusqlite::Result<i64> {
    // Cached: every search asks it.
    let value: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'generation'")?
        .query_row([], |row| row.get(0))
        .optional()?;
    Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
}

fn bump_generation(conn: &Connection) -> rusqlite::Result<()> {
    let next = generation(conn)? + 1;
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?1)", [next.to_string()])?;
    Ok(())
}

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// Why syncing one file failed.
enum SyncError {
    Sqlite(rusqlite::Error),
    Io(std::io::Error),
}

impl From<rusqlite::Error> for SyncError {
    fn from(error: rusqlite::Error) -> Self {
        SyncError::Sqlite(error)
    }
}

impl From<std::io::Error> for SyncError {
    fn from(error: std::io::Error) -> Self {
        SyncError::Io(error)
    }
}

/// Syncs one file against its last indexed state.
fn sync_file(
    tx: &rusqlite::Transaction<'_>,
    source: &SourceFile,
    known: Option<&FileState>,
    report: &mut SyncReport,
) -> Result<(), SyncError> {
    let metadata = match fs::metadata(&source.absolute) {
        Ok(metadata) => metadata,
        // Gone between the listing and now: the next sync removes it.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    if known.is_some_and(|k| k.mtime == mtime && k.size == metadata.len()) {
        return Ok(());
    }
    if source.format == Format::History
        && let Some(known) = known.filter(|k| k.size < metadata.len())
        && tail_hash(&source.absolute, known.size)? == known.tail
    {
        return append_history(tx, source, known, mtime, report);
    }
    let bytes = fs::read(&source.absolute)?;
    let hash = format!("{:016x}", sources::fnv1a64(&bytes));
    // Index whole lines only: a line being appended right now is read next time.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    let complete = if source.format == Format::Markdown { bytes.len() } else { complete };
    let size = complete as u64;
    if known.is_some_and(|k| k.hash == hash) {
        tx.execute("UPDATE files SET mtime = ?2, size = ?3 WHERE path = ?1", params![source.path, mtime, size as i64])?;
        return Ok(());
    }
    report.files_read += 1;
    let text = String::from_utf8_lossy(&bytes[..complete]);
    let chunks = match source.format {
        Format::Markdown => sources::chunk_markdown(source, &text),
        Format::History => sources::chunk_history(source, &text, 1),
    };
    let mut kept: HashMap<String, Vec<u8>> = HashMap::new();
    {
        let mut old = tx.prepare_cached("SELECT id, vec FROM chunks WHERE path = ?1 AND vec IS NOT NULL")?;
        let rows = old.query_map([&source.path], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))?;
        for row in rows {
            let (id, vec) = row?;
            kept.insert(id, vec);
        }
    }
    report.removed += tx.execute("DELETE FROM chunks WHERE path = ?1", [&source.path])?;
    insert_chunks(tx, &chunks, &kept)?;
    report.added += chunks.len();
    let lines = text.lines().count();
    let tail = tail_of(&bytes[..complete]);
    tx.execute(
        "INSERT OR REPLACE INTO files(path, mtime, size, hash, lines, tail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![source.path, mtime, size as i64, hash, lines as i64, tail],
    )?;
    Ok(())
}

/// Reads only what was appended to the history since `known`.
fn append_history(
    tx: &rusqlite::Transaction<'_>,
    source: &SourceFile,
    known: &FileState,
    mtime: i64,
    report: &mut SyncReport,
) -> Result<(), SyncError> {
    let mut file = fs::File::open(&source.absolute)?;
    file.seek(SeekFrom::Start(known.size))?;
    let mut added = Vec::new();
    file.read_to_end(&mut added)?;
    let complete = added.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    let text = String::from_utf8_lossy(&added[..complete]);
    let chunks = sources::chunk_history(source, &text, known.lines + 1);
    insert_chunks(tx, &chunks, &HashMap::new())?;
    report.files_read += 1;
    report.added += chunks.len();
    let size = known.size + complete as u64;
    let tail = tail_hash(&source.absolute, size)?;
    tx.execute(
        "UPDATE files SET mtime = ?2, size = ?3, lines = ?4, tail = ?5, hash = '' WHERE path = ?1",
        params![source.path, mtime, size as i64, (known.lines + text.lines().count()) as i64, tail],
    )?;
    Ok(())
}

fn insert_chunks(
    tx: &rusqlite::Transaction<'_>,
    chunks: &[Chunk],
    vectors: &HashMap<String, Vec<u8>>,
) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT OR REPLACE INTO chunks(id, path, category, start_line, end_line, cursor, time, context, text, vec) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for chunk in chunks {
        insert.execute(params![
            chunk.id,
            chunk.path,
            chunk.category.as_str(),
            chunk.start_line as i64,
            chunk.end_line as i64,
            chunk.cursor.map(|c| c as i64),
            chunk.time,
            chunk.context,
            chunk.text,
            vectors.get(&chunk.id),
        ])?;
    }
    Ok(())
}

/// Hash of the [`TAIL_BYTES`] before offset `end` of the file.
fn tail_hash(path: &Path, end: u64) -> std::io::Result<String> {
    let start = end.saturating_sub(TAIL_BYTES);
    let mut file = fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut buffer = vec![0u8; (end - start) as usize];
    file.read_exact(&mut buffer)?;
    Ok(format!("{:016x}", sources::fnv1a64(&buffer)))
}

fn tail_of(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES as usize);
    format!("{:016x}", sources::fnv1a64(&bytes[start..]))
}
