//! A minimal Rust tokenizer for [`crate::layout`]: identifiers, `::` and punctuation, with
//! comments (nested too), string, raw string, byte and character literals and whitespace
//! dropped, so that text in them never looks like code.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of `source` that matter here: identifiers, `::` and punctuation; comments,
/// literals and whitespace are dropped.
pub(crate) fn tokenize(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_block_comment(&chars, i);
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|&c| c.is_alphanumeric() || c == '_')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match (word.as_str(), chars.get(i).copied()) {
                ("r" | "br" | "cr", Some('"' | '#')) if raw_string_start(&chars, i) => {
                    i = skip_raw_string(&chars, i);
                }
                ("b" | "c", Some('"')) => i = skip_string(&chars, i + 1),
                ("b", Some('\'')) => i = skip_char_or_lifetime(&chars, i),
                ("r", Some('#')) => i += 1, // raw identifier: the name follows
                _ => tokens.push(Token::Ident(word)),
            }
        } else if c.is_ascii_digit() {
            while chars
                .get(i)
                .is_some_and(|&c| c.is_alphanumeric() || c == '_')
            {
                i += 1;
            }
            tokens.push(Token::Punct('0'));
        } else if c == ':' && next == Some(':') {
            tokens.push(Token::PathSep);
            i += 2;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// From just after the opening `"` to just after the closing one.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while let Some(&c) = chars.get(i) {
        i += if c == '\\' { 2 } else { 1 };
        if c == '"' {
            break;
        }
    }
    i
}

/// Whether `chars[i..]` is `#*"`, the rest of a raw string's opening.
fn raw_string_start(chars: &[char], mut i: usize) -> bool {
    while chars.get(i) == Some(&'#') {
        i += 1;
    }
    chars.get(i) == Some(&'"')
}

/// From the `#`s or `"` after `r` to just after the closing `"#...`.
fn skip_raw_string(chars: &[char], mut i: usize) -> usize {
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// At a `'`: skips a character literal, or only the quote of a lifetime or label.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => {
            let mut j = i + 3;
            while chars.get(j).is_some_and(|&c| c != '\'') {
                j += 1;
            }
            j + 1
        }
        (Some(_), Some('\'')) => i + 3,
        _ => i + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(source: &str) -> Vec<String> {
        tokenize(source)
            .into_iter()
            .filter_map(|t| match t {
                Token::Ident(word) => Some(word),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn literals_and_comments_are_dropped() {
        let source = r###"a /* b /* c */ d */ e // f
            g "h \" i" j r#"k "l" m"# n br##"o"## p b'"' q '\'' r '{' s '\u{7b}' t
            fn u<'v>(w: &'v str) {}"###;
        assert_eq!(
            idents(source),
            [
                "a", "e", "g", "j", "n", "p", "q", "r", "s", "t", "fn", "u", "v", "w", "v", "str"
            ]
        );
    }

    #[test]
    fn paths_and_raw_identifiers() {
        assert_eq!(
            tokenize("r#crate::x{1}"),
            [
                Token::Ident("crate".into()),
                Token::PathSep,
                Token::Ident("x".into()),
                Token::Punct('{'),
                Token::Punct('0'),
                Token::Punct('}'),
            ]
        );
    }
}
