//! What goes wrong with a plan before it runs.

/// A plan that cannot run as written, or would break a budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Not a plan: the JSON does not parse into one.
    #[error("the plan is not valid: {0}")]
    Json(String),
    /// A plan whose parts do not go together (sizes, patterns, nesting).
    #[error("the plan cannot run as written: {0}")]
    Shape(String),
    /// A step was given a variable of the wrong kind (pieces where results go…).
    #[error("{0}")]
    WrongInput(String),
    /// The input could not be read while splitting.
    #[error("the plan's input could not be read: {0}")]
    Read(String),
    /// A piece is longer than the sub-model's window takes.
    #[error("piece {index} is about {tokens} tokens, over the {budget} the sub-model's window leaves for a prompt; use a smaller `split.size` (at most about {fits} characters fit)")]
    PieceTooLarge {
        /// The piece (0-based).
        index: usize,
        /// Its estimated tokens with the instruction.
        tokens: u64,
        /// Tokens a prompt may take.
        budget: u64,
        /// Characters of a piece that fit.
        fits: u64,
    },
    /// Running the plan would break a budget: the figures, before any call.
    #[error("the plan was refused before any call: {0}")]
    OverBudget(String),
}
