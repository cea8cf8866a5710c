//! `mock-llm`: a scripted stand-in for an OpenAI- or Anthropic-compatible model server.
//!
//! It is not a model. Benchmarks and the offline demo start it, read the first line of
//! its stdout (`listening on http://127.0.0.1:PORT`) and point rlm at that URL; every
//! answer comes from the script file — text, errors, dropped connections, or tool calls
//! in each API's own format. It serves until killed, or until its stdin is closed when
//! stdin is a pipe (so a parent that dies takes it along).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rlm_test_support::mock_llm::{oracle_rule, MockLlm, MockReply, MockScript, WhenEmpty};

const USAGE: &str = "\
mock-llm — a scripted stand-in for a model server (NOT a model)

Serves OpenAI POST /v1/chat/completions (and /chat/completions), OpenAI Responses
POST /v1/responses (and /responses; what the Codex CLI speaks) and Anthropic
POST /v1/messages, streamed (SSE) or not, on 127.0.0.1. WebSocket upgrades are
refused with 426 so clients fall back to HTTP. Every answer comes from the script;
POST /extras/tokenize/count answers {\"count\": characters / 4} as llama-cpp-python's
tokenizer endpoint does, and GET /openapi.json lists it there as llama-cpp-python's
server does. GET /_mock/requests lists the completion requests received, GET
/_mock/side_requests the others (/v1/models, /props, tokenizers); auth header values
are never kept. --latency-ms delays every answer, side requests too.

Usage: mock-llm [--port N] [--script FILE.json] [--latency-ms N] [--default TEXT]
                [--model NAME] [--record-limit N] [--no-stdin-watch] [--oracle]
                [--context-window TOKENS [--window-silent]]

  --port N          port on 127.0.0.1 (default 0: a free port)
  --script FILE     JSON: [reply, ...] or {\"replies\": [...], \"rules\": [{CONDITIONS,
                    \"reply\": R}], \"default\": R, \"latency_ms\": N, \"model\": S}
                    rules come first, then the replies in order, then the default;
                    a rule's CONDITIONS (at least one, all must hold):
                      \"contains\": S | \"regex\": S   the last user message
                      \"api\": \"openai\"|\"anthropic\"|\"responses\"
                      \"path\": S, \"model\": S      the target / model contains S
                      \"tools\": true|false         tools offered or not (side requests
                                                  such as session titles offer none)
                      \"tool\": NAME                a tool of that name is offered
                      \"tool_results\": true|false  tool results present or not
                      \"system\": S                 the system prompt contains S
                    e.g. {\"tools\": false, \"reply\": \"A title\"}; a reply R is
                    a string or {\"text\"|\"tool_calls\"|\"status\"+\"body\"|\"close\": true|
                    \"endless\": BYTES, \"delay_ms\", \"usage\", \"chunk_bytes\", ...};
                    \"endless\" streams text in pieces of BYTES until the client
                    hangs up (a runaway server; a slow drip with chunk_bytes 1 and
                    chunk_delay_ms)
                    tool calls, after an optional \"text\":
                      {\"tool_calls\": [{\"name\": \"ctx_grep\",
                        \"arguments\": {\"variable\": \"context\", \"pattern\": \"ERROR\"}}]}
                    each call may carry an \"id\"; \"raw_arguments\": TEXT instead of
                    \"arguments\" sends TEXT verbatim (e.g. not JSON); \"repeat_tool_names\":
                    true streams OpenAI calls as llama.cpp once did (name in every chunk);
                    to Responses clients a call is a function_call, or a custom_tool_call
                    (\"arguments\" a string sent as the input text) when the request
                    offers the tool as a custom (freeform) tool, as Codex's \"exec\"
  --latency-ms N    wait N ms before every answer (side requests too)
  --default TEXT    answer TEXT once the script is used up (else HTTP 500 \"script exhausted\")
  --model NAME      model name reported in answers (default mock-llm)
  --context-window TOKENS
                    refuse a request longer than TOKENS (prompt characters / 4 plus
                    its max_tokens) as llama-cpp-python's server does: streamed, an
                    event stream without data; whole, HTTP 400 \"This model's maximum
                    context length is TOKENS tokens…\"; /v1/models gives TOKENS as
                    max_model_len, as vLLM does
  --window-silent   with --context-window: do not give it in /v1/models
  --record-limit N  keep the last N requests for /_mock/requests (default 10000)
  --no-stdin-watch  do not exit when stdin closes
  --oracle          answer the items of `rlm-orchestrate eval` right when the data is in
                    view: Python code for an RLM run (then FINAL_VAR(answer); for the
                    official rlms library, code that fills its `answer` dict), the answer
                    computed from the prompt's (cut) context for the baseline, in eval's
                    prompt or RULER's and OOLONG's framings; OOLONG's labels by a wh-word
                    rule (docs/benchmarks.md); other requests get the script's replies

The first line on stdout is `listening on http://127.0.0.1:PORT`.";

/// Requests kept for `/_mock/requests` unless `--record-limit` says otherwise.
const DEFAULT_RECORD_LIMIT: usize = 10_000;

#[derive(Debug, Default)]
struct Args {
    port: u16,
    script: Option<PathBuf>,
    latency_ms: Option<u64>,
    default: Option<String>,
    model: Option<String>,
    record_limit: Option<usize>,
    watch_stdin: bool,
    oracle: bool,
    context_window: Option<u32>,
    window_silent: bool,
    help: bool,
}

fn parse_args(mut raw: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        watch_stdin: true,
        ..Args::default()
    };
    while let Some(arg) = raw.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| raw.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |name: &str, text: String| {
            text.parse::<u64>()
                .map_err(|_| format!("{name} takes a whole number, not {text:?}"))
        };
        match flag.as_str() {
            "-h" | "--help" => args.help = true,
            "--port" => {
                let text = value("--port")?;
                args.port = text
                    .parse()
                    .map_err(|_| format!("--port takes 0..65535, not {text:?}"))?;
            }
            "--script" => args.script = Some(PathBuf::from(value("--script")?)),
            "--latency-ms" => {
                args.latency_ms = Some(number("--latency-ms", value("--latency-ms")?)?)
            }
            "--default" => args.default = Some(value("--default")?),
            "--model" => args.model = Some(value("--model")?),
            "--record-limit" => {
                let limit = number("--record-limit", value("--record-limit")?)?;
                args.record_limit = Some(usize::try_from(limit).unwrap_or(usize::MAX));
            }
            "--no-stdin-watch" => args.watch_stdin = false,
            "--oracle" => args.oracle = true,
            "--context-window" => {
                let text = value("--context-window")?;
                args.context_window = Some(text.parse().map_err(|_| {
                    format!("--context-window takes a number of tokens, not {text:?}")
                })?);
            }
            "--window-silent" => args.window_silent = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            let _ = writeln!(io::stderr(), "error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        let _ = writeln!(io::stdout(), "{USAGE}");
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(
                io::stderr(),
                "error: cannot start the async runtime: {error}"
            );
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(io::stderr(), "error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let mut script = match &args.script {
        Some(path) => MockScript::from_file(path).map_err(|error| error.to_string())?,
        None => MockScript::new(),
    };
    if let Some(ms) = args.latency_ms {
        script.latency = Duration::from_millis(ms);
    }
    if let Some(text) = args.default {
        script.when_empty = WhenEmpty::Repeat(MockReply::text(text));
    }
    if let Some(model) = args.model {
        script.model = model;
    }
    script.record_limit = args.record_limit.unwrap_or(DEFAULT_RECORD_LIMIT);
    script.context_window = args.context_window;
    script.advertise_window = !args.window_silent;
    if args.oracle {
        script = script.rule(oracle_rule());
        if matches!(script.when_empty, WhenEmpty::Error) {
            script.when_empty = WhenEmpty::Repeat(MockReply::text("I do not know."));
        }
    }
    let description = script.describe();

    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let mock = MockLlm::start_on(addr, script)
        .await
        .map_err(|error| format!("cannot listen on {addr}: {error}; pick another --port"))?;
    // The banner first: a script that echoes our stdout line once it has read it
    // then shows the two in this order, never the banner after its own next output.
    let _ = write_line(&mut io::stderr(), &description);
    write_line(
        &mut io::stdout(),
        &format!("listening on {}", mock.base_url()),
    )
    .map_err(|error| format!("cannot write to stdout: {error}"))?;

    if args.watch_stdin && !stdin_is_dev_null() {
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
        // A plain thread: tokio's stdin would keep the runtime from shutting down.
        std::thread::spawn(move || {
            let mut sink = [0_u8; 4096];
            let mut stdin = io::stdin().lock();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = closed_tx.send(());
        });
        let _ = closed_rx.await;
    } else {
        std::future::pending::<()>().await;
    }
    mock.shutdown().await;
    Ok(())
}

/// Writes `line` and a newline with one `write_all` (one `write(2)` unless the pipe is
/// full), then flushes. Formatting straight into the unbuffered stderr writes each
/// piece separately, so a line could be split by whatever else was printing to the
/// same terminal at that moment (the demo echoes our stdout line then).
fn write_line(out: &mut impl Write, line: &str) -> io::Result<()> {
    out.write_all(format!("{line}\n").as_bytes())?;
    out.flush()
}

/// Background jobs of a non-interactive shell get `/dev/null` as stdin; watching it
/// would end the server at once.
fn stdin_is_dev_null() -> bool {
    std::fs::read_link("/proc/self/fd/0")
        .is_ok_and(|target| target == std::path::Path::new("/dev/null"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(|arg| arg.to_string()))
    }

    /// Records every `write` call it gets.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_written_in_one_piece() {
        let mut out = Writes::default();
        let line = MockScript::replies(["a"]).describe();
        write_line(&mut out, &line).unwrap();
        assert_eq!(out.0, [format!("{line}\n").into_bytes()]);
    }

    #[test]
    fn the_help_shows_the_tool_call_format() {
        assert!(USAGE.contains("{\"tool_calls\": [{\"name\": \"ctx_grep\","));
        assert!(USAGE.contains("raw_arguments"));
        assert!(USAGE.contains("\"tools\": true|false"));
        assert!(USAGE.contains("/v1/responses"));
    }

    #[test]
    fn flags_parse_in_both_forms() {
        let args = parse(&[
            "--port",
            "8089",
            "--script=s.json",
            "--latency-ms",
            "5",
            "--no-stdin-watch",
        ])
        .unwrap();
        assert_eq!(args.port, 8089);
        assert_eq!(args.script, Some(PathBuf::from("s.json")));
        assert_eq!(args.latency_ms, Some(5));
        assert!(!args.watch_stdin);
        assert!(parse(&[]).unwrap().watch_stdin);
        assert!(parse(&["--port", "70000"]).is_err());
        assert!(parse(&["--latency-ms"]).is_err());
        assert!(parse(&["--wat"]).is_err());
    }
}
