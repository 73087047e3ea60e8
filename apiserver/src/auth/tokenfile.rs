//! `--token-auth-file`: kube-apiserver's static token CSV (`token,user,uid,"g1,g2"`).

use std::collections::HashMap;
use std::path::Path;

use super::AuthError;
use super::user::UserInfo;

/// Parses one CSV line (RFC 4180 quoting: `"a,b"`, `""` for a quote).
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if at_start => quoted = true,
            '"' => return Err("bare \" in non-quoted field".into()),
            ',' if !quoted => {
                out.push(std::mem::take(&mut cur));
                at_start = true;
                continue;
            }
            c => cur.push(c),
        }
        at_start = false;
    }
    if quoted {
        return Err("extraneous or missing \" in quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// The users of a token file's text, by token. Empty tokens are skipped and a repeated
/// token keeps its last row, as kube-apiserver does.
///
/// # Errors
/// A row with fewer than three columns, or bad quoting, naming the file and line.
pub fn parse(text: &str, path: &str) -> Result<HashMap<String, UserInfo>, AuthError> {
    let mut users = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let record = fields(line).map_err(|e| AuthError::TokenFile {
            path: path.to_owned(),
            detail: format!("line {}: {e}", i + 1),
        })?;
        if record.len() < 3 {
            return Err(AuthError::TokenFile {
                path: path.to_owned(),
                detail: format!(
                    "must have at least 3 columns (token, user name, unique user ID), found {} on line {}",
                    record.len(),
                    i + 1
                ),
            });
        }
        if record[0].is_empty() {
            tracing::warn!(
                path,
                line = i + 1,
                "empty token has been found in the token file"
            );
            continue;
        }
        let groups = match record.get(3) {
            Some(g) if !g.is_empty() => g.split(',').map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        if users
            .insert(
                record[0].clone(),
                UserInfo::authenticated(&record[1], &record[2], groups),
            )
            .is_some()
        {
            tracing::warn!(
                path,
                line = i + 1,
                "duplicate token in the token file; the later row wins"
            );
        }
    }
    Ok(users)
}

/// Reads and parses a token file.
///
/// # Errors
/// The file cannot be read or does not parse.
pub fn load(path: &Path) -> Result<HashMap<String, UserInfo>, AuthError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| AuthError::TokenFile {
        path: shown.clone(),
        detail: e.to_string(),
    })?;
    parse(&text, &shown)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rows_give_users_with_groups_and_bad_rows_name_the_line() {
        let users = parse(
            "t0k3n,alice,1001,\"dev,ops\"\n\n,nobody,1\nb0b,bob,1002\nb0b,robert,1003\n",
            "f",
        )
        .unwrap();
        let alice = &users["t0k3n"];
        assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "1001"));
        assert_eq!(alice.groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(
            users["b0b"].name, "robert",
            "a repeated token keeps the later row"
        );
        assert_eq!(users.len(), 2, "the empty token is skipped");
        let err = parse("ok,u,1\nonly,two\n", "/etc/tokens.csv")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/etc/tokens.csv") && err.contains("found 2 on line 2"),
            "{err}"
        );
        assert!(parse("a,\"b,1\n", "f").is_err());
    }
}
