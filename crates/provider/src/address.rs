//! Endpoint addresses: where requests go, and how an address is shown.
//!
//! A base URL may carry credentials (`https://user:key@host/v1`) or a query
//! (`?api-version=…`, `?key=…`). Requests use it as given, with the API's path inserted
//! before the query; messages, traces and the live view only ever see it redacted.

use reqwest::Url;

/// What stands in for a credential in a shown address.
const REDACTED: &str = "redacted";

/// Query parameters whose values are treated as credentials (matched as substrings of
/// the lowercased name).
const SECRET_PARAMETERS: [&str; 7] = [
    "key",
    "token",
    "secret",
    "sig",
    "password",
    "auth",
    "credential",
];

/// `base` with `path` (e.g. `/chat/completions`) appended to its path, its query kept
/// after it. `to_path` turns the base's path into the endpoint's.
pub(crate) fn endpoint_url(base: &str, to_path: impl FnOnce(&str) -> String) -> String {
    match Url::parse(base) {
        Ok(url) if url.query().is_some() => {
            let mut without_query = url.clone();
            without_query.set_query(None);
            let joined = to_path(without_query.as_str().trim_end_matches('/'));
            format!("{joined}?{}", url.query().unwrap_or_default())
        }
        _ => to_path(base),
    }
}

/// `url` with its user name, password and credential-like query values replaced by
/// `redacted`; anything that is not a URL is returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return url.to_owned();
    };
    let mut changed = false;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Both fail only for URLs that cannot have credentials, which have none.
        let _ = parsed.set_password(None);
        let _ = parsed.set_username(REDACTED);
        changed = true;
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(name, value)| {
                let lowered = name.to_ascii_lowercase();
                if SECRET_PARAMETERS.iter().any(|s| lowered.contains(s)) {
                    changed = true;
                    (name.into_owned(), REDACTED.to_owned())
                } else {
                    (name.into_owned(), value.into_owned())
                }
            })
            .collect();
        if changed {
            parsed.query_pairs_mut().clear().extend_pairs(pairs);
        }
    }
    if changed {
        parsed.to_string()
    } else {
        url.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::{endpoint_url, redact_url};

    #[test]
    fn credentials_in_an_address_are_never_shown() {
        assert_eq!(
            redact_url("https://user:hunter2@api.example.com/v1"),
            "https://redacted@api.example.com/v1"
        );
        assert_eq!(
            redact_url("https://sk-abc123@api.example.com/v1"),
            "https://redacted@api.example.com/v1"
        );
        let shown = redact_url("http://127.0.0.1:8/v1/x?api-version=2024&api_key=SECRET&sig=S");
        assert!(
            !shown.contains("SECRET") && !shown.contains("=S"),
            "{shown}"
        );
        assert!(shown.contains("api-version=2024"), "{shown}");
        assert_eq!(redact_url("http://127.0.0.1:8/v1"), "http://127.0.0.1:8/v1");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn the_path_goes_before_the_query() {
        let path = |base: &str| format!("{base}/chat/completions");
        assert_eq!(
            endpoint_url("http://h/v1?api-version=1", path),
            "http://h/v1/chat/completions?api-version=1"
        );
        assert_eq!(
            endpoint_url("http://h/v1", path),
            "http://h/v1/chat/completions"
        );
    }
}
