//! What the model is told when a built-in prototype refuses a new property.
//!
//! The built-in prototypes take no new properties (`prelude/seal.js`: a getter on
//! `Object.prototype.value` broke every later cell). Cells run in strict mode, so an
//! assignment that would add one throws, as a definition does: QuickJS's bare
//! `TypeError: object is not extensible` is extended with why and what to write
//! instead.

/// What the model is told about the prototypes.
const WHY: &str = "No property can be added to a built-in prototype in this REPL: every object inherits them, the REPL's own too. Write a function instead (`function sum(list) { … }`, called as `sum(x)`), or a class of your own (`class MyList extends Array { sum() { … } }`).";

/// `error` with why, when it is a prototype refusing a new property (`TypeError:
/// object is not extensible` from code that names a prototype).
pub(super) fn explained(error: String, code: &str) -> String {
    if error.starts_with("TypeError: object is not extensible") && code.contains("prototype") {
        format!("{error}\n{WHY}")
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_addition_to_a_prototype_is_explained_and_nothing_else() {
        let refused = "TypeError: object is not extensible\n    at <eval> (<cell 1>:1:1)";
        let told = explained(refused.to_owned(), "Array.prototype.sum = function () {}");
        assert!(told.starts_with(refused), "{told}");
        assert!(
            told.contains("No property can be added to a built-in prototype"),
            "{told}"
        );
        for (error, code) in [
            (refused, "Object.preventExtensions(o); o.x = 1"),
            ("TypeError: not a function", "Array.prototype.x()"),
        ] {
            assert_eq!(explained(error.to_owned(), code), error);
        }
    }
}
