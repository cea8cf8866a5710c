//! Agent presets: how to run one agent CLI headless, as data.
//!
//! A preset is what a user would otherwise have to find out by trial: the command
//! template (the `--agent-cmd` language), the environment variables to pass (its login
//! and gateway), fixed variables to set (no telemetry), and what changes under
//! `--agent-sandbox on` (another template when the CLI's own sandbox cannot run inside
//! ours; its config and state in the agent's private temporary directory), and the
//! arguments that keep the user's own CLI configuration (its MCP servers) out unless
//! `--agent-user-config` asks for it. The built-in ones (`claude`, `codex`, `llm`) are TOML files compiled in; `config show
//! --agent NAME` prints one, and a changed copy is used with `--agent FILE.toml`.
//! `--agent-cmd` with `--agent-env` is a preset too, with nothing else set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::command::AgentCommand;
use super::AgentError;

/// The built-in presets: name and TOML text.
const BUILT_IN: [(&str, &str); 3] = [
    ("claude", include_str!("presets/claude.toml")),
    ("codex", include_str!("presets/codex.toml")),
    ("llm", include_str!("presets/llm.toml")),
];

/// Name given to the preset made from `--agent-cmd`.
pub const CUSTOM_PRESET_NAME: &str = "agent-cmd";

/// How to run one agent CLI (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentPreset {
    /// `claude`, `codex`, `llm`, or the user's own.
    pub name: String,
    /// One line: what it runs and what it may do.
    #[serde(default)]
    pub about: String,
    /// The command template (`--agent-cmd` language).
    pub command: String,
    /// The template used instead under `--agent-sandbox on`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_command: Option<String>,
    /// Variables passed from the user's environment when set (`--agent-env` adds more).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Variables set for the agent; values are templates (`{agent_tmp}`, `{data_dir}`,
    /// `{rlm_bin}`, `{env:NAME}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_env: BTreeMap<String, String>,
    /// Variables set only under `--agent-sandbox on` (after `set_env`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub confined_env: BTreeMap<String, String>,
    /// Files or directories a confined agent may also read (its configuration),
    /// as templates (`{env:LLM_USER_PATH}`); a value that renders empty is skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confined_read: Vec<String>,
    /// Arguments added after the command (and the confined one) unless
    /// `--agent-user-config`: they keep the user's own configuration of the CLI (the
    /// MCP servers it would start) out of the agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without_user_config: Vec<String>,
}

/// Why a preset could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// No built-in preset has that name, and it is not a file.
    #[error("no agent preset named `{name}`: the built-in ones are {}; or give the path of a preset file (print one with `rlm-orchestrate config show --agent claude`)", built_in_names().join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The preset file could not be read.
    #[error("failed to read the agent preset {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The preset is not valid TOML of the preset's shape.
    #[error("failed to parse the agent preset {origin}: {message}; print a valid one with `rlm-orchestrate config show --agent claude`")]
    Parse {
        /// The file or built-in name.
        origin: String,
        /// What the parser said.
        message: String,
    },
    /// A template of the preset is not valid.
    #[error("agent preset `{name}`: {source}")]
    Template {
        /// The preset.
        name: String,
        /// The template problem.
        #[source]
        source: AgentError,
    },
    /// A variable name is not usable.
    #[error("agent preset `{name}`: `{variable}` is not a valid environment variable name")]
    VariableName {
        /// The preset.
        name: String,
        /// The name.
        variable: String,
    },
}

/// The names of the built-in presets.
pub fn built_in_names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(name, _)| *name).collect()
}

impl AgentPreset {
    /// The built-in preset `name`, if there is one.
    pub fn built_in(name: &str) -> Option<Result<Self, PresetError>> {
        BUILT_IN
            .iter()
            .find(|(builtin, _)| *builtin == name)
            .map(|(name, text)| Self::from_toml(text, name))
    }

    /// `--agent SPEC`: a built-in name, else a preset file.
    pub fn resolve(spec: &str) -> Result<Self, PresetError> {
        if let Some(preset) = Self::built_in(spec) {
            return preset;
        }
        let path = Path::new(spec);
        if !path.exists() {
            return Err(PresetError::Unknown {
                name: spec.to_owned(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| PresetError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Parses and checks a preset written in TOML (`origin` names it in errors).
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PresetError> {
        let preset: Self = toml::from_str(text).map_err(|error| PresetError::Parse {
            origin: origin.to_owned(),
            message: error.message().to_owned(),
        })?;
        preset.check()?;
        Ok(preset)
    }

    /// The preset made from `--agent-cmd TEMPLATE` (and `--agent-env`).
    pub fn custom(template: &str) -> Self {
        Self {
            name: CUSTOM_PRESET_NAME.to_owned(),
            about: "the --agent-cmd template".to_owned(),
            command: template.to_owned(),
            confined_command: None,
            pass_env: Vec::new(),
            set_env: BTreeMap::new(),
            confined_env: BTreeMap::new(),
            confined_read: Vec::new(),
            without_user_config: Vec::new(),
        }
    }

    /// The preset as TOML, for `config show --agent`: a built-in one as its file, with
    /// its comments; any other as the fields it has.
    pub fn to_toml(&self) -> String {
        let built_in = BUILT_IN.iter().find(|(name, text)| {
            *name == self.name && Self::from_toml(text, name).is_ok_and(|p| p == *self)
        });
        match built_in {
            Some((_, text)) => (*text).to_owned(),
            None => toml::to_string_pretty(self)
                .unwrap_or_else(|error| format!("# cannot print: {error}\n")),
        }
    }

    /// Checks its templates and variable names.
    pub fn check(&self) -> Result<(), PresetError> {
        self.parse_commands(false).map(|_| ())?;
        let names = self
            .pass_env
            .iter()
            .chain(self.set_env.keys())
            .chain(self.confined_env.keys());
        for variable in names {
            if variable.is_empty() || variable.contains(['=', '\0']) {
                return Err(PresetError::VariableName {
                    name: self.name.clone(),
                    variable: variable.clone(),
                });
            }
        }
        Ok(())
    }

    /// Its command templates, parsed: unconfined, and under `--agent-sandbox on`;
    /// [`without_user_config`](Self::without_user_config) is added to both unless
    /// `user_config`.
    pub fn parse_commands(
        &self,
        user_config: bool,
    ) -> Result<(AgentCommand, AgentCommand), PresetError> {
        let extra = if user_config || self.without_user_config.is_empty() {
            String::new()
        } else {
            format!(" {}", shell_words::join(&self.without_user_config))
        };
        let parse = |template: &str| {
            AgentCommand::parse(&format!("{template}{extra}")).map_err(|source| {
                PresetError::Template {
                    name: self.name.clone(),
                    source,
                }
            })
        };
        let command = parse(&self.command)?;
        let confined = parse(self.confined_command.as_deref().unwrap_or(&self.command))?;
        Ok((command, confined))
    }
}

/// A preset ready to run: its templates parsed once, and the user's `--agent-env`.
#[derive(Debug, Clone)]
pub struct AgentProgram {
    /// The preset it comes from.
    pub preset: AgentPreset,
    /// The command run unconfined.
    pub command: AgentCommand,
    /// The command run under `--agent-sandbox on`.
    pub confined_command: AgentCommand,
    /// Variables passed from the user's environment: the preset's, then `--agent-env`.
    pub pass_env: Vec<String>,
}

/// How the user asked a preset to be run.
#[derive(Debug, Clone, Default)]
pub struct ProgramOptions {
    /// `--agent-env`: variables passed besides the preset's own.
    pub extra_env: Vec<String>,
    /// `--agent-user-config`: leave out the preset's `without_user_config`, so the CLI
    /// reads the user's own configuration (and starts its MCP servers).
    pub user_config: bool,
    /// The directory relative paths of the command resolve against (where `run` was
    /// started): a confined agent works in its temporary directory.
    pub base_dir: Option<PathBuf>,
}

impl AgentProgram {
    /// Prepares `preset` as `options` ask.
    pub fn new(preset: AgentPreset, options: &ProgramOptions) -> Result<Self, PresetError> {
        preset.check()?;
        let (mut command, mut confined_command) = preset.parse_commands(options.user_config)?;
        if let Some(base) = &options.base_dir {
            command = command.with_paths_from(base);
            confined_command = confined_command.with_paths_from(base);
        }
        let extra_env = &options.extra_env;
        let mut pass_env = preset.pass_env.clone();
        for name in extra_env {
            if !pass_env.contains(name) {
                pass_env.push(name.clone());
            }
        }
        Ok(Self {
            preset,
            command,
            confined_command,
            pass_env,
        })
    }

    /// The command to run, confined or not.
    pub fn command(&self, confined: bool) -> &AgentCommand {
        if confined {
            &self.confined_command
        } else {
            &self.command
        }
    }

    /// The variables to set (templates), confined or not.
    pub fn set_env(&self, confined: bool) -> impl Iterator<Item = (&String, &String)> {
        let confined_env = confined.then_some(&self.preset.confined_env);
        self.preset
            .set_env
            .iter()
            .chain(confined_env.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_preset_parses_and_round_trips_through_its_printed_form() {
        for name in built_in_names() {
            let preset = AgentPreset::built_in(name).unwrap().unwrap();
            assert_eq!(preset.name, name);
            let printed = preset.to_toml();
            let again = AgentPreset::from_toml(&printed, "printed").unwrap();
            assert_eq!(again, preset, "{printed}");
        }
    }

    #[test]
    fn a_preset_file_is_used_and_a_wrong_name_lists_the_built_in_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(&file, "name = \"mine\"\ncommand = \"my-agent {prompt}\"\n").unwrap();
        let preset = AgentPreset::resolve(file.to_str().unwrap()).unwrap();
        assert_eq!(preset.name, "mine");
        let error = AgentPreset::resolve("claud").unwrap_err().to_string();
        assert!(error.contains("claude, codex, llm"), "{error}");
    }

    #[test]
    fn bad_presets_are_refused_with_the_reason() {
        let unknown = AgentPreset::from_toml("name = \"x\"\ncommand = \"a\"\ncmd = 1\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("f.toml") && unknown.contains("cmd"),
            "{unknown}"
        );
        let template = AgentPreset::from_toml("name = \"x\"\ncommand = \"a '\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(template.contains("agent preset `x`"), "{template}");
        let variable =
            AgentPreset::from_toml("name = \"x\"\ncommand = \"a\"\npass_env = [\"A=B\"]\n", "f")
                .unwrap_err();
        assert!(matches!(variable, PresetError::VariableName { .. }));
    }

    #[test]
    fn the_confined_command_and_environment_apply_only_when_confined() {
        let codex = AgentPreset::built_in("codex").unwrap().unwrap();
        let options = ProgramOptions {
            extra_env: vec!["EXTRA".to_owned()],
            ..ProgramOptions::default()
        };
        let program = AgentProgram::new(codex, &options).unwrap();
        assert!(program
            .command(false)
            .template()
            .contains("workspace-write"));
        assert!(program
            .command(true)
            .template()
            .contains("--dangerously-bypass-approvals-and-sandbox"));
        assert!(program.set_env(false).all(|(name, _)| name != "HOME"));
        assert!(program.set_env(true).any(|(name, _)| name == "HOME"));
        assert_eq!(program.pass_env.last().map(String::as_str), Some("EXTRA"));
        let custom = AgentProgram::new(
            AgentPreset::custom("agent {prompt}"),
            &ProgramOptions::default(),
        )
        .unwrap();
        assert_eq!(custom.command(true), custom.command(false));
    }

    #[test]
    fn the_users_own_config_is_left_out_unless_asked_for() {
        for (name, flag) in [
            ("claude", "--strict-mcp-config"),
            ("codex", "--ignore-user-config"),
        ] {
            let preset = AgentPreset::built_in(name).unwrap().unwrap();
            let isolated = AgentProgram::new(preset.clone(), &ProgramOptions::default()).unwrap();
            for confined in [false, true] {
                assert!(
                    isolated.command(confined).template().ends_with(flag),
                    "{name}: {}",
                    isolated.command(confined)
                );
            }
            let options = ProgramOptions {
                user_config: true,
                ..ProgramOptions::default()
            };
            let own = AgentProgram::new(preset, &options).unwrap();
            for confined in [false, true] {
                assert!(!own.command(confined).template().contains(flag), "{name}");
            }
        }
    }
}
