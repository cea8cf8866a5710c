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
    /// A piece is longer than the sub-model's window takes. The size to use comes
    /// first: a small model given two figures tends to take the earlier one (here a
    /// token budget) for its next `split.size`.
    #[error("use \"size\": {fits} or less in `split` (counted in {unit}): piece {index} is about {tokens} tokens, over the {budget} tokens the sub-model's window leaves for a prompt")]
    PieceTooLarge {
        /// The piece (0-based).
        index: usize,
        /// Its estimated tokens with the instruction.
        tokens: u64,
        /// Tokens a prompt may take.
        budget: u64,
        /// How much of a piece fits, in `unit`s.
        fits: u64,
        /// The unit of `fits`: the split's own (`characters`, `lines`, `tokens`,
        /// `records`), so the advice can be followed as written.
        unit: &'static str,
    },
    /// A piece makes a prompt longer than `--sub-context-chars` allows; the size to use
    /// comes first, as for [`Self::PieceTooLarge`].
    #[error("use \"size\": {fits} or less in `split` (counted in {unit}): piece {index} makes a prompt of {chars} characters, over --sub-context-chars {max}")]
    PieceOverChars {
        /// The piece (0-based).
        index: usize,
        /// Characters of its prompt, the instruction included.
        chars: u64,
        /// `--sub-context-chars`.
        max: u64,
        /// How much of a piece fits, in `unit`s.
        fits: u64,
        /// The unit of `fits`.
        unit: &'static str,
    },
    /// Running the plan would break a budget: the figures, before any call.
    #[error("the plan was refused before any call: {0}")]
    OverBudget(String),
    /// The plan's pieces would have the host read its input again more times over
    /// than overlaps may ([`crate::work::HostWork`]): the figures and what fits,
    /// before any pass over the pieces.
    #[error("the plan was refused before any work: {0}")]
    HostWork(String),
}

impl PlanError {
    /// A too-large piece's advice (for the window or `--sub-context-chars`) in the unit
    /// the split counts in: a `lines` split's
    /// size is lines, so "22453 or less (counted in characters)" becomes "423 or less
    /// (counted in lines)". `piece_chars` and `piece_units`: the characters, and the lines (or
    /// records) of the piece that did not fit.
    pub fn in_units_of(
        self,
        by: crate::SplitBy,
        piece_chars: u64,
        piece_units: u64,
        chars_per_token: f64,
    ) -> Self {
        let chars_per_unit = piece_chars.checked_div(piece_units).filter(|&c| c > 0);
        let convert = |fits: u64| match (by, chars_per_unit) {
            (crate::SplitBy::Lines, Some(chars)) => ((fits / chars).max(1), "lines"),
            (crate::SplitBy::Records, Some(chars)) => ((fits / chars).max(1), "records"),
            (crate::SplitBy::Tokens, _) if chars_per_token > 0.0 => {
                ((fits as f64 / chars_per_token) as u64, "tokens")
            }
            _ => (fits, "characters"),
        };
        match self {
            Self::PieceTooLarge {
                index,
                tokens,
                budget,
                fits,
                unit: "characters",
            } => {
                let (fits, unit) = convert(fits);
                Self::PieceTooLarge {
                    index,
                    tokens,
                    budget,
                    fits,
                    unit,
                }
            }
            Self::PieceOverChars {
                index,
                chars,
                max,
                fits,
                unit: "characters",
            } => {
                let (fits, unit) = convert(fits);
                Self::PieceOverChars {
                    index,
                    chars,
                    max,
                    fits,
                    unit,
                }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SplitBy;

    fn too_large() -> PlanError {
        PlanError::PieceTooLarge {
            index: 0,
            tokens: 9303,
            budget: 7168,
            fits: 22_453,
            unit: "characters",
        }
    }

    #[test]
    fn the_advice_is_in_the_splits_own_unit() {
        // `{"by": "lines", "size": 20000}` over a log of 600 lines, 32 199 characters:
        // one piece, too large.
        let lines = too_large().in_units_of(SplitBy::Lines, 32_199, 600, 3.5);
        assert!(
            lines
                .to_string()
                .starts_with("use \"size\": 423 or less in `split` (counted in lines)"),
            "{lines}"
        );
        let chars = too_large().in_units_of(SplitBy::Chars, 30_000, 0, 3.5);
        assert!(
            chars
                .to_string()
                .starts_with("use \"size\": 22453 or less in `split` (counted in characters)"),
            "{chars}"
        );
        let tokens = too_large().in_units_of(SplitBy::Tokens, 31_500, 0, 3.5);
        assert!(
            tokens
                .to_string()
                .starts_with("use \"size\": 6415 or less in `split` (counted in tokens)"),
            "{tokens}"
        );
        let other = PlanError::Shape("x".into()).in_units_of(SplitBy::Lines, 1, 1, 1.0);
        assert_eq!(other, PlanError::Shape("x".into()));
    }
}
