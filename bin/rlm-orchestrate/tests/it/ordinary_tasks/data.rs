//! The files users have, generated deterministically and small (a few hundred lines):
//! an orders log of `key=value` fields, a Markdown changelog, JSON lines of events, a
//! CSV of sales, `key: value` blocks (tickets, a server inventory), a travel diary in
//! prose, a web server's access log. Each is shaped so that its questions have one
//! right answer (a unique maximum, a short list), which the cases state.

/// 300 orders, one a line: `2025-03-07T10:06:00Z order=1006 customer=alice amount=806`.
/// Alice placed 111 of them, Bob 80, Carol 60, Dave 49; the most paid for one is 998
/// (once), and the most frequent amount is 19 (every ninth order).
pub fn orders_log() -> String {
    let mut left = [("alice", 111), ("bob", 80), ("carol", 60), ("dave", 49)];
    // Who orders next, round after round, until everyone's orders are placed.
    const TURNS: [usize; 8] = [0, 1, 0, 2, 3, 0, 1, 2];
    let mut customers = Vec::new();
    while left.iter().any(|(_, n)| *n > 0) {
        for turn in TURNS {
            if left[turn].1 > 0 {
                left[turn].1 -= 1;
                customers.push(left[turn].0);
            }
        }
    }
    customers
        .iter()
        .enumerate()
        .map(|(k, customer)| {
            let amount = match k {
                250 => 998,
                k if k % 9 == 0 => 19,
                // Distinct for every k below 960 (131 is prime to 960), 979 at most.
                k => 20 + (k * 131) % 960,
            };
            format!(
                "2025-03-{:02}T{:02}:{:02}:00Z order={} customer={customer} amount={amount}\n",
                1 + k % 28,
                8 + k % 10,
                k % 60,
                1000 + k
            )
        })
        .collect()
}

/// The newest release of [`changelog`], as its file writes it.
pub const LATEST_RELEASE: &str = "## [3.0.0] - 2026-02-02
### Removed
- Support for Python 3.8.
### Changed
- BREAKING: the configuration file moved from ~/.quillrc to ~/.config/quill/config.toml.
### Added
- Parallel exports: `quill export --jobs N`.
### Fixed
- A save interrupted by Ctrl-C no longer truncates the document.";

/// A Keep-a-Changelog file: [`LATEST_RELEASE`], then forty older releases (2.9.1 down
/// to 1.0.0), newest first; 2.0.0 was released on 2025-03-10.
pub fn changelog() -> String {
    const TOPICS: [&str; 8] = [
        "the PDF exporter",
        "spell checking",
        "the outline view",
        "word counts",
        "the Markdown importer",
        "autosave",
        "keyboard shortcuts",
        "the theme picker",
    ];
    let mut text = format!(
        "# Changelog\n\nAll notable changes to quill are documented in this file.\n\n{LATEST_RELEASE}\n"
    );
    let mut i = 0;
    for major in [2, 1] {
        for minor in (0..=9).rev() {
            for patch in [1, 0] {
                let date = format!(
                    "{}-{:02}-{:02}",
                    2025 - i / 24,
                    12 - (i / 2) % 12,
                    20 - (i % 2) * 10
                );
                let topic = TOPICS[i % TOPICS.len()];
                text.push_str(&format!("\n## [{major}.{minor}.{patch}] - {date}\n### Fixed\n- A crash in {topic} on empty documents.\n"));
                if patch == 0 {
                    let other = TOPICS[(i * 3 + 1) % TOPICS.len()];
                    text.push_str(&format!("### Added\n- Settings for {other}.\n"));
                }
                i += 1;
            }
        }
    }
    text
}

/// 300 events, one JSON object a line, February to April 2025:
/// `{"ts": "2025-03-08T09:41:00Z", "user": "u017", "event": "login", "bytes": 0}`.
pub fn events_jsonl() -> String {
    const EVENTS: [&str; 5] = ["login", "download", "logout", "login", "view"];
    (0..300usize)
        .map(|k| {
            let event = EVENTS[k % EVENTS.len()];
            let bytes = if event == "download" { (k * 389) % 50_000 } else { 0 };
            format!(
                "{{\"ts\": \"2025-{:02}-{:02}T{:02}:{:02}:00Z\", \"user\": \"u{:03}\", \"event\": \"{event}\", \"bytes\": {bytes}}}\n",
                2 + k / 100,
                1 + (k * 7) % 28,
                8 + k % 12,
                k % 60,
                1 + (k * 17) % 41,
            )
        })
        .collect()
}

/// 250 sales of February 2025 with a header: `date,region,product,units,unit_price`.
pub fn sales_csv() -> String {
    const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
    const PRODUCTS: [(&str, &str); 5] = [
        ("kettle", "34.50"),
        ("toaster", "27.00"),
        ("blender", "59.90"),
        ("desk lamp", "19.99"),
        ("fan", "44.00"),
    ];
    let mut text = "date,region,product,units,unit_price\n".to_owned();
    for k in 0..250usize {
        let (product, price) = PRODUCTS[k % PRODUCTS.len()];
        text.push_str(&format!(
            "2025-02-{:02},{},{product},{},{price}\n",
            1 + (k * 11) % 28,
            REGIONS[(k * 3 + k / 7) % REGIONS.len()],
            1 + (k * 7) % 23,
        ));
    }
    text
}

/// 60 support tickets as `key: value` blocks separated by blank lines; the open ones of
/// high priority are T-1013, T-1033 and T-1053.
pub fn tickets() -> String {
    const STATUS: [&str; 4] = ["open", "closed", "pending", "closed"];
    const PRIORITY: [&str; 5] = ["normal", "low", "high", "normal", "normal"];
    const PEOPLE: [&str; 4] = ["maria", "tomas", "ines", "kofi"];
    const SUMMARIES: [&str; 5] = [
        "Login times out after a password reset",
        "Invoice PDF shows the wrong currency",
        "Export to CSV drops the last row",
        "Search ignores accented letters",
        "Dark mode: unreadable table headers",
    ];
    (0..60usize)
        .map(|i| {
            format!(
                "Ticket: T-{}\nOpened: 2025-01-{:02}\nStatus: {}\nPriority: {}\nAssignee: {}\nSummary: {}\n\n",
                1001 + i,
                1 + i % 28,
                STATUS[i % STATUS.len()],
                PRIORITY[i % PRIORITY.len()],
                PEOPLE[(i * 3) % PEOPLE.len()],
                SUMMARIES[(i * 2) % SUMMARIES.len()],
            )
        })
        .collect()
}

/// 40 servers as `key: value` blocks; 14 of them (every third) are in `fra1`.
pub fn servers() -> String {
    const ROLES: [&str; 4] = ["web", "db", "cache", "worker"];
    const LOCATIONS: [&str; 3] = ["fra1", "ams3", "nyc1"];
    (0..40usize)
        .map(|i| {
            format!(
                "hostname: {}-{i:02}\nrole: {}\nos: debian 12\nlocation: {}\nram_gb: {}\n\n",
                ROLES[i % ROLES.len()],
                ROLES[i % ROLES.len()],
                LOCATIONS[i % LOCATIONS.len()],
                [8, 16, 32][i % 3],
            )
        })
        .collect()
}

/// The line of [`diary`] that gives the rent.
pub const RENT_LINE: &str =
    "Day 41. The landlord came by and told us the rent would be 1,450 euros a month, water included.";

/// A travel diary of 200 days, one paragraph a line (`Day 12. …`): the author arrives in
/// Lisbon, Porto, Seville and Granada, in that order, and one day ([`RENT_LINE`]) is
/// told the rent.
pub fn diary() -> String {
    const DAYS: [&str; 8] = [
        "We walked along the river and ate grilled sardines for lunch.",
        "It rained all morning, so we stayed in and read.",
        "The market was busy; we bought figs, cheese and bread.",
        "We took the tram up the hill to see the old castle.",
        "A quiet day: laundry, postcards and a long nap.",
        "We got lost in the narrow streets and found a tiny bookshop.",
        "The museum was closed, so we sat in a park instead.",
        "We cooked dinner at home and planned the next week.",
    ];
    (1..=200usize)
        .map(|day| match day {
            3 => "Day 3. We arrived in Lisbon late at night and took a taxi to the flat.\n"
                .to_owned(),
            41 => format!("{RENT_LINE}\n"),
            58 => "Day 58. We arrived in Porto by train, tired but happy.\n".to_owned(),
            112 => "Day 112. We arrived in Seville in the middle of a heat wave.\n".to_owned(),
            160 => "Day 160. We arrived in Granada and went straight to the Alhambra.\n".to_owned(),
            day => format!("Day {day}. {}\n", DAYS[(day * 5) % DAYS.len()]),
        })
        .collect()
}

/// 300 requests in the combined log format, on 12 March 2025 from 10:00, one every 7
/// seconds: 13 answered 404 (every 23rd from the 6th), 17 a server error (every 17th
/// from the 10th but one that is a 404; the first at 10:01:03). 10.0.0.23 sent 54 of
/// them and got the most 404s (4).
pub fn access_log() -> String {
    const IPS: [&str; 6] = [
        "10.0.0.7",
        "10.0.0.12",
        "10.0.0.23",
        "192.168.1.40",
        "172.16.4.2",
        "10.0.0.99",
    ];
    const PAGES: [&str; 6] = [
        "/",
        "/index.html",
        "/products",
        "/cart",
        "/checkout",
        "/about",
    ];
    const MISSING: [&str; 3] = ["/old-home", "/wp-login.php", "/favicon.ico"];
    (0..300usize)
        .map(|k| {
            let (path, status) = if k % 23 == 5 {
                (MISSING[(k / 23) % MISSING.len()], 404)
            } else if k % 17 == 9 {
                (PAGES[k % PAGES.len()], [500, 503][(k / 17) % 2])
            } else {
                (PAGES[k % PAGES.len()], 200)
            };
            let secs = k * 7;
            format!(
                "{} - - [12/Mar/2025:{:02}:{:02}:{:02} +0000] \"GET {path} HTTP/1.1\" {status} {} \"-\" \"Mozilla/5.0\"\n",
                IPS[(k * 5 + k / 11) % IPS.len()],
                10 + secs / 3600,
                secs / 60 % 60,
                secs % 60,
                200 + (k * 613) % 9000,
            )
        })
        .collect()
}

/// 300 lines of an application's log in logfmt, from 10:00 on 12 March 2025: `level=`
/// info, warn (every 11th line from the 8th) or error (every 13th from the 5th: 23
/// lines), never fatal.
pub fn app_log() -> String {
    const SERVICES: [&str; 3] = ["api", "db", "auth"];
    (0..300usize)
        .map(|k| {
            let (level, msg) = if k % 13 == 4 {
                ("error", "upstream timed out")
            } else if k % 11 == 7 {
                ("warn", "slow response")
            } else {
                ("info", "request served")
            };
            format!(
                "2025-03-12T10:{:02}:{:02}Z level={level} svc={} msg=\"{msg}\" duration_ms={}\n",
                k / 60,
                k % 60,
                SERVICES[(k * 7) % SERVICES.len()],
                5 + (k * 37) % 400,
            )
        })
        .collect()
}
