//! Cutting text that came from MAAS down to a size fit for errors and logs.

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `...`.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}
