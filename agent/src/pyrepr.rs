//! Python's `repr()` of the values upstream puts into step flag names.
//!
//! Upstream names a step's completion flag after `base64(f"{step.arguments}_{step.returncodes}")`,
//! that is, after Python's `repr()` of a `list[str]` and a `list[int]`. A node moved from the
//! upstream agent keeps its flags only if we reproduce those strings byte for byte.

use unicode_general_category::{GeneralCategory, get_general_category};

/// `repr(list_of_str)`: `['a', "it's"]`.
pub fn str_list(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|item| str_repr(item)).collect();
    format!("[{}]", parts.join(", "))
}

/// `repr(list_of_int)`: `[0, 1, -1]`.
pub fn int_list(items: &[i64]) -> String {
    let parts: Vec<String> = items.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// `repr(str)`, following CPython's `unicode_repr`: single quotes unless the text contains a
/// single quote and no double quote; backslash escapes for the quote, backslash, `\t`, `\n`,
/// `\r`; `\xhh`, `\uhhhh` or `\Uhhhhhhhh` for characters that are not printable.
pub fn str_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for ch in text.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => push_escape(&mut out, c),
            c if c.is_ascii() => out.push(c),
            c if is_printable(c) => out.push(c),
            c => push_escape(&mut out, c),
        }
    }
    out.push(quote);
    out
}

fn push_escape(out: &mut String, ch: char) {
    let code = ch as u32;
    let escaped = if code <= 0xff {
        format!("\\x{code:02x}")
    } else if code <= 0xffff {
        format!("\\u{code:04x}")
    } else {
        format!("\\U{code:08x}")
    };
    out.push_str(&escaped);
}

/// Python's `str.isprintable()` for one character: everything except the "Other" (C*) and
/// "Separator" (Z*) general categories, with the ASCII space as the one exception.
fn is_printable(ch: char) -> bool {
    if ch == ' ' {
        return true;
    }
    !matches!(
        get_general_category(ch),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::SpaceSeparator
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values are what CPython prints for `repr(...)` of the same value.
    #[test]
    fn str_repr_matches_cpython() {
        let cases: &[(&str, &str)] = &[
            ("", "''"),
            ("apply", "'apply'"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("it's \"both\"", "'it\\'s \"both\"'"),
            ("back\\slash", "'back\\\\slash'"),
            ("tab\there", "'tab\\there'"),
            ("line\nbreak\r", "'line\\nbreak\\r'"),
            ("\u{1}\u{1f}\u{7f}", "'\\x01\\x1f\\x7f'"),
            ("env:FOO", "'env:FOO'"),
            ("a b", "'a b'"),
            ("café", "'café'"),
            ("日本", "'日本'"),
            ("😀", "'😀'"),
            ("\u{a0}", "'\\xa0'"),
            ("\u{ad}", "'\\xad'"),
            ("\u{85}", "'\\x85'"),
            ("\u{200b}", "'\\u200b'"),
            ("\u{2028}", "'\\u2028'"),
            ("\u{3000}", "'\\u3000'"),
            ("\u{e000}", "'\\ue000'"),
            ("\u{10ffff}", "'\\U0010ffff'"),
            ("\u{e0001}", "'\\U000e0001'"),
        ];
        for (input, expected) in cases {
            assert_eq!(str_repr(input), *expected, "repr of {input:?}");
        }
    }

    #[test]
    fn list_reprs_match_cpython() {
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(str_list(&[]), "[]");
        assert_eq!(str_list(&strings(&["a", "b"])), "['a', 'b']");
        assert_eq!(str_list(&strings(&["it's", "x"])), "[\"it's\", 'x']");
        assert_eq!(int_list(&[]), "[]");
        assert_eq!(int_list(&[0]), "[0]");
        assert_eq!(int_list(&[0, 1, -15, 255]), "[0, 1, -15, 255]");
    }
}
