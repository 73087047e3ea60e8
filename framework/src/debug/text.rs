//! Aligned text tables for `Accept: text/plain`.

/// Renders rows under headers, columns padded to their widest cell.
pub(crate) fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        for (i, c) in cells.iter().enumerate() {
            out.push_str(c);
            if i < last {
                let pad = widths[i].saturating_sub(c.chars().count()) + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    };
    line(headers.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let t = table(
            &["ID", "STATE"],
            vec![
                vec!["a-long-id".into(), "running".into()],
                vec!["b".into(), "pending".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "ID         STATE");
        assert_eq!(lines[1], "a-long-id  running");
        assert_eq!(lines[2], "b          pending");
    }
}
