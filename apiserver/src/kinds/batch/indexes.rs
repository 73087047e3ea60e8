//! Index lists of Indexed Jobs (`"1,3-5"`), as kube-apiserver reads them in
//! `successPolicy.rules[].succeededIndexes` (`validateIndexesFormat`).

/// `validateIndexesFormat`: how many indexes `text` (`"1,3-5"`) names, each below
/// `completions`, in increasing order; or kube's reason it does not parse.
pub(super) fn count_indexes(text: &str, completions: i32) -> Result<i32, String> {
    if text.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total: i32 = 0;
    for interval in text.split(',') {
        let (x, y) = parse_interval(interval, completions)?;
        if let Some(l) = last
            && l >= x
        {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        // Both ends are below `completions`, an i32.
        total = total.wrapping_add(i32::try_from(y - x + 1).unwrap_or(i32::MAX));
        last = Some(y);
    }
    Ok(total)
}

/// One interval, `x` or `x-y`, as `parseIndexInterval` reads it (`strconv.Atoi`).
pub(super) fn parse_interval(interval: &str, completions: i32) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = interval.split('-').collect();
    if limits.len() > 2 {
        return Err(format!(
            "the fragment {interval:?} violates the requirement that an index interval can have at most two parts separated by '-'"
        ));
    }
    let index = |s: &str| -> Result<i64, String> {
        let n: i64 = s
            .parse()
            .map_err(|_| format!("cannot convert string to integer for index: {s:?}"))?;
        if n >= i64::from(completions) {
            return Err(format!("too large index: {s:?}"));
        }
        Ok(n)
    };
    let x = index(limits[0])?;
    let Some(second) = limits.get(1) else {
        return Ok((x, x));
    };
    let y = index(second)?;
    if x >= y {
        return Err(format!("non-increasing order, previous: {x}, current: {y}"));
    }
    Ok((x, y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_counted_and_refused_with_kubes_reasons() {
        assert_eq!(count_indexes("", 5), Ok(0));
        assert_eq!(count_indexes("0,2-4", 5), Ok(4));
        assert_eq!(
            count_indexes("1-3-4", 5),
            Err(
                "the fragment \"1-3-4\" violates the requirement that an index interval can have at most two parts separated by '-'"
                    .into()
            )
        );
        assert_eq!(
            count_indexes("a", 5),
            Err("cannot convert string to integer for index: \"a\"".into())
        );
        assert_eq!(count_indexes("7", 5), Err("too large index: \"7\"".into()));
        assert_eq!(
            count_indexes("3,1", 5),
            Err("non-increasing order, previous: 3, current: 1".into())
        );
        assert_eq!(
            count_indexes("2-2", 5),
            Err("non-increasing order, previous: 2, current: 2".into())
        );
    }
}
