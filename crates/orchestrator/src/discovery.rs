//! Server discovery once per base URL and model: the [`ServerFacts`] a round of
//! discovery learned, kept in `<data-dir>/servers/` for later runs and for children
//! (which share their parent's data directory), and asked beside the run's first
//! request rather than before it.
//!
//! A record is a small JSON file, `0600`, named by a hash of the base URL and the
//! model, holding the redacted base URL, the model, what was learned and when. It is
//! read only when it is a regular file (not a link) owned by the data directory's owner and
//! writable by nobody else, at most [`RECORD_MAX_BYTES`], for the same base URL and
//! model, of this format and younger than [`RECORD_TTL_MS`]; anything else is asked
//! again and written over. What a record says cannot send anything elsewhere: the
//! tokenizer's address is always the configured base URL's, the record names only
//! which of the known tokenizers the server offers.

use std::io::Read as _;
#[cfg(test)]
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::provider::discovery::{discover, discovers, DISCOVERY_FORMAT_VERSION};
use crate::provider::{redact_url, ContextWindow, ProviderConfig, ServerFacts, Tokenizer};
use crate::store::private_fs::write_private_atomic;
use crate::store::Durability;

/// Where the records are kept, under the data directory.
pub const SERVERS_DIR: &str = "servers";

/// How long a record is believed: a server restarted with another window or model
/// behind the same name is asked again within the hour (a smaller window is learned
/// sooner, from the first refusal, and written back).
pub const RECORD_TTL_MS: u64 = 60 * 60 * 1000;

/// The largest record read (a record is a few hundred bytes).
pub const RECORD_MAX_BYTES: u64 = 64 * 1024;

/// The records of one data directory.
#[derive(Debug, Clone)]
pub struct DiscoveryCache {
    dir: PathBuf,
    /// Whose files to believe: the data directory's owner.
    owner: Option<u32>,
}

impl DiscoveryCache {
    /// The records under `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join(SERVERS_DIR),
            owner: std::fs::metadata(data_dir).ok().map(|m| m.uid()),
        }
    }

    /// The record's file for `config`'s base URL and model.
    pub fn path(&self, config: &ProviderConfig) -> PathBuf {
        let mut hash = Sha256::new();
        hash.update(config.base_url.as_deref().unwrap_or_default().as_bytes());
        hash.update([0]);
        hash.update(config.model.as_bytes());
        let digest = hash.finalize();
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// The record for `config`, when one is there to believe (see the module's doc).
    pub fn read(&self, config: &ProviderConfig, now_ms: u64) -> Option<ServerFacts> {
        let path = self.path(config);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        let meta = file.metadata().ok()?;
        let trusted = meta.is_file()
            && Some(meta.uid()) == self.owner
            && meta.mode() & 0o022 == 0
            && meta.len() <= RECORD_MAX_BYTES;
        if !trusted {
            tracing::warn!(path = %path.display(), "a server record that is not a private file of the data directory's owner was ignored");
            return None;
        }
        let mut text = String::new();
        file.take(RECORD_MAX_BYTES).read_to_string(&mut text).ok()?;
        let facts: ServerFacts = serde_json::from_str(&text).ok()?;
        let base_url = redact_url(config.base_url.as_deref().unwrap_or_default());
        let fresh = now_ms.saturating_sub(facts.learned_at_ms) < RECORD_TTL_MS
            && facts.learned_at_ms <= now_ms;
        (facts.format_version == DISCOVERY_FORMAT_VERSION
            && facts.base_url == base_url
            && facts.model == config.model
            && fresh)
            .then_some(facts)
    }

    /// Keeps `facts` as `config`'s record (atomically, `0600`); a failure is logged.
    pub fn write(&self, config: &ProviderConfig, facts: &ServerFacts) {
        let path = self.path(config);
        let written = serde_json::to_vec_pretty(facts)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                write_private_atomic(&path, &bytes, Durability::Bulk).map_err(|e| e.to_string())
            });
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "the server record could not be kept; the next run asks again");
        }
    }
}

/// Discovery for one model: its record, read at once when one is kept, else learned
/// on first need (started early by [`Discovery::start`]) and kept.
#[derive(Debug)]
pub struct Discovery {
    config: ProviderConfig,
    cache: Option<DiscoveryCache>,
    facts: OnceCell<Option<ServerFacts>>,
}

impl Discovery {
    /// Discovery of `config`'s server, with its record when `cache` keeps a fresh one.
    pub fn new(config: &ProviderConfig, cache: Option<DiscoveryCache>) -> Arc<Self> {
        let facts = if !discovers(config) {
            OnceCell::new_with(Some(None))
        } else {
            match cache
                .as_ref()
                .and_then(|c| c.read(config, rlm_protocol::now_ms()))
            {
                Some(kept) => OnceCell::new_with(Some(Some(kept))),
                None => OnceCell::new(),
            }
        };
        Arc::new(Self {
            config: config.clone(),
            cache,
            facts,
        })
    }

    /// Starts asking the server in the background, when nothing is known yet and a
    /// runtime is there to run it; whoever needs the answer waits for the same round.
    pub fn start(self: &Arc<Self>) {
        if self.facts.initialized() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let discovery = Arc::clone(self);
        runtime.spawn(async move {
            discovery.facts().await;
        });
    }

    /// What is known without asking: `Some(None)` when the server is not asked (or
    /// said nothing), `None` while discovery is under way or not begun.
    pub fn known(&self) -> Option<Option<&ServerFacts>> {
        self.facts.get().map(Option::as_ref)
    }

    /// What the server says, asked once (and kept) when no record was there.
    pub async fn facts(&self) -> Option<&ServerFacts> {
        self.facts
            .get_or_init(|| async {
                let facts = discover(&self.config).await;
                if let (Some(cache), Some(facts)) = (&self.cache, &facts) {
                    cache.write(&self.config, facts);
                }
                facts
            })
            .await
            .as_ref()
    }

    /// The tokenizer the server offers, if it said it has one (asks when not known).
    pub async fn tokenizer(&self) -> Option<Tokenizer> {
        self.facts().await?.tokenizer
    }

    /// Keeps a window a refusal taught in the record, so the next run and the
    /// children start with it.
    pub fn remember_window(&self, window: &ContextWindow) {
        let (Some(cache), Some(Some(facts))) = (&self.cache, self.facts.get()) else {
            return;
        };
        let mut facts = facts.clone();
        facts.window = Some(window.clone());
        cache.write(&self.config, &facts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderKind, WindowSource};

    fn config(base_url: &str, model: &str) -> ProviderConfig {
        let mut config = ProviderConfig::new(ProviderKind::OpenAi, model);
        config.base_url = Some(base_url.to_owned());
        config
    }

    fn facts(config: &ProviderConfig, learned_at_ms: u64) -> ServerFacts {
        ServerFacts {
            format_version: DISCOVERY_FORMAT_VERSION,
            base_url: redact_url(config.base_url.as_deref().unwrap_or_default()),
            model: config.model.clone(),
            learned_at_ms,
            window: Some(ContextWindow {
                tokens: 4_096,
                source: WindowSource::Refusal,
            }),
            tokenizer: Some(Tokenizer::LlamaCpp),
            constrain: None,
        }
    }

    #[test]
    fn a_record_is_kept_private_and_read_back_only_while_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiscoveryCache::new(dir.path());
        let one = config("http://u:secret@127.0.0.1:9/v1", "m");
        let now = 10 * RECORD_TTL_MS;
        cache.write(&one, &facts(&one, now));
        let path = cache.path(&one);
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(cache.read(&one, now + 1), Some(facts(&one, now)));
        // Another model or base URL has a record of its own.
        assert_eq!(cache.read(&config("http://127.0.0.1:9/v1", "m"), now), None);
        assert_eq!(
            cache.read(&config("http://u:secret@127.0.0.1:9/v1", "n"), now),
            None
        );
        // An old record is asked again; one from the future too.
        assert_eq!(cache.read(&one, now + RECORD_TTL_MS), None);
        assert_eq!(cache.read(&one, now - 1), None);
    }

    #[test]
    fn a_record_others_could_write_or_a_link_is_not_believed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiscoveryCache::new(dir.path());
        let one = config("http://127.0.0.1:9/v1", "m");
        cache.write(&one, &facts(&one, 5));
        let path = cache.path(&one);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert_eq!(cache.read(&one, 6), None, "group-writable");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache.read(&one, 6).is_some());
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::rename(&path, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        assert_eq!(cache.read(&one, 6), None, "a link");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "{not json").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(cache.read(&one, 6), None, "not a record");
    }

    #[tokio::test]
    async fn a_kept_record_answers_at_once_and_a_learned_window_is_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiscoveryCache::new(dir.path());
        let one = config("http://127.0.0.1:9/v1", "m");
        let mut kept = facts(&one, rlm_protocol::now_ms());
        kept.window = None;
        cache.write(&one, &kept);
        // Nothing listens at port 9: an answer can only come from the record.
        let discovery = Discovery::new(&one, Some(cache.clone()));
        assert_eq!(discovery.known(), Some(Some(&kept)));
        assert_eq!(discovery.tokenizer().await, Some(Tokenizer::LlamaCpp));
        let taught = ContextWindow {
            tokens: 2_048,
            source: WindowSource::Refusal,
        };
        discovery.remember_window(&taught);
        let read = cache.read(&one, rlm_protocol::now_ms());
        assert_eq!(read.and_then(|f| f.window), Some(taught));
        // A model of no server of its own is never asked.
        let anthropic = ProviderConfig::new(ProviderKind::Anthropic, "claude");
        assert_eq!(Discovery::new(&anthropic, Some(cache)).known(), Some(None));
    }
}
