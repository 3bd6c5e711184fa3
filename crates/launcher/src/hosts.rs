//! Hosts and the placement of ranks on them.
//!
//! Where the host list comes from, in order: `--host/-H` and `--hostfile/-f` (both may be
//! given; their hosts are concatenated), else a Slurm allocation (`SLURM_JOB_NODELIST` with
//! `SLURM_TASKS_PER_NODE` or `SLURM_JOB_CPUS_PER_NODE`), else this machine alone. A host named
//! twice is one host whose slots add up (as in Open MPI). Hostfile lines are Hydra's `host[:n]`
//! or Open MPI's `host [slots=n] [max_slots=m]`, `#` starts a comment; anything else is an error
//! naming the file and line.
//!
//! Placement ([`place`]): `--map-by slot` (the default) fills each host's slots in turn, `node`
//! deals ranks round-robin over the hosts with free slots; `-ppn N` makes every host's slots N.
//! More ranks than slots is an error unless `--oversubscribe` is given, and then the placement
//! goes round again over the hosts in the same order.

use std::fmt;

/// One host of the job and its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub slots: usize,
}

/// How ranks are dealt out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapBy {
    /// Block: host 0's slots first, then host 1's...
    Slot,
    /// Cyclic: one rank per host in turn.
    Node,
}

/// A host list or placement that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError(pub String);

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Characters a host name may have (names, IPv4 and IPv6 literals; nothing a shell interprets).
fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'))
}

fn count(what: &str, text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| (1..=1 << 20).contains(&n))
        .ok_or_else(|| format!("{what} {text:?} is not a number of slots (1 or more)"))
}

/// Adds a host, merging with an earlier entry of the same name.
fn add(hosts: &mut Vec<Host>, name: &str, slots: usize) {
    match hosts.iter_mut().find(|h| h.name == name) {
        Some(h) => h.slots += slots,
        None => hosts.push(Host {
            name: name.to_string(),
            slots,
        }),
    }
}

/// `h1,h2:4,h3` (the `--host` syntax of Hydra and Open MPI: slots default to 1).
pub fn parse_host_list(text: &str, hosts: &mut Vec<Host>) -> Result<(), HostError> {
    for item in text.split(',') {
        let item = item.trim();
        let (name, slots) = match item.rsplit_once(':') {
            // An IPv6 literal has colons of its own; its slots follow a closing bracket.
            Some((n, s)) if !n.contains(':') || n.ends_with(']') => (
                n,
                count("--host: slots", s).map_err(|e| HostError(format!("{e} in {item:?}")))?,
            ),
            _ => (item, 1),
        };
        if !name_ok(name) {
            return Err(HostError(format!(
                "--host: {item:?} is not a host name (letters, digits, '.', '-', '_')"
            )));
        }
        add(hosts, name, slots);
    }
    Ok(())
}

/// The lines of a hostfile (`file` names it in errors).
pub fn parse_hostfile(file: &str, text: &str, hosts: &mut Vec<Host>) -> Result<(), HostError> {
    let before = hosts.len();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| {
            HostError(format!(
                "hostfile {file}, line {}: {why}: {:?} (expected 'host', 'host:N' or \
                 'host slots=N')",
                i + 1,
                raw.trim()
            ))
        };
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let (name, mut slots) = match first.rsplit_once(':') {
            Some((n, s)) if !n.contains(':') || n.ends_with(']') => {
                (n, Some(count("slots", s).map_err(bad)?))
            }
            _ => (first, None),
        };
        if !name_ok(name) {
            return Err(bad(format!("{name:?} is not a host name")));
        }
        for w in words {
            match w.split_once('=') {
                Some(("slots", n)) if slots.is_none() => {
                    slots = Some(count("slots", n).map_err(bad)?)
                }
                Some(("slots", _)) => return Err(bad("slots given twice".into())),
                // Open MPI's upper bound for oversubscription: accepted, the slots decide.
                Some(("max_slots" | "max-slots", n)) => {
                    count("max_slots", n).map_err(bad)?;
                }
                _ => return Err(bad(format!("cannot read {w:?}"))),
            }
        }
        add(hosts, name, slots.unwrap_or(1));
    }
    if hosts.len() == before {
        return Err(HostError(format!("hostfile {file} names no host")));
    }
    Ok(())
}

/// Expands a Slurm host list: `node[01-03,7],login,gpu[1-2]`.
pub fn expand_nodelist(text: &str) -> Result<Vec<String>, HostError> {
    let bad = || HostError(format!("cannot read the Slurm node list {text:?}"));
    // Split on commas outside brackets.
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(bad());
        }
    }
    items.push(&text[start..]);
    let mut out = Vec::new();
    for item in items.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        let Some(open) = item.find('[') else {
            out.push(item.to_string());
            continue;
        };
        let close = item.find(']').ok_or_else(bad)?;
        let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
        for r in ranges.split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let width = a.len();
            let (lo, hi): (u64, u64) =
                (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if hi < lo || hi - lo > 1 << 16 {
                return Err(bad());
            }
            for n in lo..=hi {
                out.push(format!("{prefix}{n:0width$}{suffix}"));
            }
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// Expands Slurm's per-node counts: `2(x3),1` -> [2, 2, 2, 1].
pub fn expand_counts(text: &str) -> Result<Vec<usize>, HostError> {
    let bad = || HostError(format!("cannot read the Slurm count list {text:?}"));
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let (n, times) = match item.split_once("(x") {
            Some((n, t)) => (n, t.strip_suffix(')').ok_or_else(bad)?),
            None => (item, "1"),
        };
        let n: usize = n.parse().map_err(|_| bad())?;
        let times: usize = times.parse().map_err(|_| bad())?;
        if times > 1 << 16 {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    Ok(out)
}

/// The hosts of a Slurm allocation, from the environment (None outside one).
pub fn slurm_hosts(
    getenv: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Vec<Host>>, HostError> {
    let Some(list) = getenv("SLURM_JOB_NODELIST").or_else(|| getenv("SLURM_NODELIST")) else {
        return Ok(None);
    };
    let names = expand_nodelist(&list)?;
    let counts = match getenv("SLURM_TASKS_PER_NODE").or_else(|| getenv("SLURM_JOB_CPUS_PER_NODE"))
    {
        Some(c) => expand_counts(&c)?,
        None => vec![1; names.len()],
    };
    if counts.len() != names.len() {
        return Err(HostError(format!(
            "the Slurm allocation lists {} nodes ({list}) but {} slot counts",
            names.len(),
            counts.len()
        )));
    }
    Ok(Some(
        names
            .into_iter()
            .zip(counts)
            .map(|(name, slots)| Host {
                name,
                slots: slots.max(1),
            })
            .collect(),
    ))
}

/// Places `np` ranks: the host index of every rank.
pub fn place(
    hosts: &[Host],
    np: usize,
    ppn: Option<usize>,
    map_by: MapBy,
    oversubscribe: bool,
) -> Result<Vec<usize>, HostError> {
    if hosts.is_empty() {
        return Err(HostError("no host to run on".into()));
    }
    let slots: Vec<usize> = hosts.iter().map(|h| ppn.unwrap_or(h.slots)).collect();
    let total: usize = slots.iter().sum();
    if np > total && !oversubscribe {
        let list: Vec<String> = hosts
            .iter()
            .zip(&slots)
            .map(|(h, s)| format!("{}:{s}", h.name))
            .collect();
        return Err(HostError(format!(
            "{np} processes requested but the hosts have only {total} slots ({}); give more \
             hosts or slots, or --oversubscribe",
            list.join(",")
        )));
    }
    let mut out = Vec::with_capacity(np);
    let mut used = vec![0usize; hosts.len()];
    // Each round gives every host up to its slots again (the oversubscribed rounds too).
    let mut round = 1;
    while out.len() < np {
        match map_by {
            MapBy::Slot => {
                for (h, &s) in slots.iter().enumerate() {
                    while used[h] < s * round && out.len() < np {
                        used[h] += 1;
                        out.push(h);
                    }
                }
            }
            MapBy::Node => loop {
                let before = out.len();
                for (h, &s) in slots.iter().enumerate() {
                    if used[h] < s * round && out.len() < np {
                        used[h] += 1;
                        out.push(h);
                    }
                }
                if out.len() == before || out.len() == np {
                    break;
                }
            },
        }
        round += 1;
    }
    Ok(out)
}

/// MPICH's `PMI_process_mapping` for a placement: `(vector,(node,count,ranks),...)`, where a
/// block puts `ranks` consecutive ranks on each of `count` consecutive nodes starting at `node`;
/// nodes are numbered in order of first appearance.
pub fn process_mapping(placement: &[usize]) -> String {
    // Renumber hosts by first appearance.
    let mut order: Vec<usize> = Vec::new();
    let node_of: Vec<usize> = placement
        .iter()
        .map(|&h| match order.iter().position(|&x| x == h) {
            Some(i) => i,
            None => {
                order.push(h);
                order.len() - 1
            }
        })
        .collect();
    // Runs of ranks on one node: (node, run length).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &n in &node_of {
        match runs.last_mut() {
            Some((m, len)) if *m == n => *len += 1,
            _ => runs.push((n, 1)),
        }
    }
    // Consecutive nodes with equal runs make one block.
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    for (n, len) in runs {
        match blocks.last_mut() {
            Some((start, count, per)) if *per == len && *start + *count == n => *count += 1,
            _ => blocks.push((n, 1, len)),
        }
    }
    // A repeating pattern is written once (MPICH applies the list again from the start).
    for period in 1..=blocks.len() {
        if blocks.len().is_multiple_of(period)
            && (period..blocks.len()).all(|i| blocks[i] == blocks[i - period])
        {
            blocks.truncate(period);
            break;
        }
    }
    let body: Vec<String> = blocks
        .iter()
        .map(|(s, c, p)| format!("({s},{c},{p})"))
        .collect();
    format!("(vector,{})", body.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: usize) -> Host {
        Host {
            name: name.into(),
            slots,
        }
    }

    #[test]
    fn host_lists() {
        let mut v = Vec::new();
        parse_host_list("a,b:4,c", &mut v).unwrap();
        parse_host_list("a:2", &mut v).unwrap();
        assert_eq!(v, [h("a", 3), h("b", 4), h("c", 1)]);
        let mut v = Vec::new();
        parse_host_list("10.0.0.1:2,[fe80::1]:3,[::1]", &mut v).unwrap();
        assert_eq!(v, [h("10.0.0.1", 2), h("[fe80::1]", 3), h("[::1]", 1)]);
        for bad in ["a:0", "a:x", "", "a,,b", "a;rm", "-oProxyCommand=x", "a:-1"] {
            assert!(parse_host_list(bad, &mut Vec::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostfiles_in_both_formats() {
        let text = "# cluster\nn1:2\nn2 slots=3 max_slots=4\n\n  n3   # one slot\nn1\n";
        let mut v = Vec::new();
        parse_hostfile("hf", text, &mut v).unwrap();
        assert_eq!(v, [h("n1", 3), h("n2", 3), h("n3", 1)]);
        for (bad, what) in [
            ("n1\nn2 slot=3\n", "line 2"),
            ("n1:two\n", "line 1"),
            ("n1 slots=0\n", "line 1"),
            ("n1 slots=2 slots=3\n", "twice"),
            ("n$1\n", "not a host name"),
            ("# nothing\n", "names no host"),
        ] {
            let e = parse_hostfile("hf", bad, &mut Vec::new()).unwrap_err();
            assert!(e.0.contains(what) && e.0.contains("hf"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn slurm_lists() {
        assert_eq!(
            expand_nodelist("n[01-03,7],login,g[1-2]x").unwrap(),
            ["n01", "n02", "n03", "n7", "login", "g1x", "g2x"]
        );
        assert_eq!(expand_nodelist("h1").unwrap(), ["h1"]);
        assert!(expand_nodelist("n[3-1]").is_err());
        assert!(expand_nodelist("n[1-").is_err());
        assert_eq!(expand_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert!(expand_counts("2(x3").is_err());
        let env = |k: &str| match k {
            "SLURM_JOB_NODELIST" => Some("h[1-2]".to_string()),
            "SLURM_TASKS_PER_NODE" => Some("2,1".to_string()),
            _ => None,
        };
        assert_eq!(
            slurm_hosts(&env).unwrap().unwrap(),
            [h("h1", 2), h("h2", 1)]
        );
        assert_eq!(slurm_hosts(&|_| None).unwrap(), None);
    }

    #[test]
    fn placement() {
        let hosts = [h("a", 2), h("b", 2), h("c", 1)];
        assert_eq!(
            place(&hosts, 5, None, MapBy::Slot, false).unwrap(),
            [0, 0, 1, 1, 2]
        );
        assert_eq!(
            place(&hosts, 5, None, MapBy::Node, false).unwrap(),
            [0, 1, 2, 0, 1]
        );
        assert_eq!(
            place(&hosts, 3, None, MapBy::Slot, false).unwrap(),
            [0, 0, 1]
        );
        let e = place(&hosts, 6, None, MapBy::Slot, false).unwrap_err();
        assert!(
            e.0.contains("6 processes") && e.0.contains("5 slots"),
            "{e}"
        );
        assert_eq!(
            place(&hosts, 7, None, MapBy::Slot, true).unwrap(),
            [0, 0, 1, 1, 2, 0, 0]
        );
        assert_eq!(
            place(&hosts, 6, Some(1), MapBy::Slot, true).unwrap(),
            [0, 1, 2, 0, 1, 2]
        );
        assert_eq!(
            place(&hosts, 6, Some(2), MapBy::Slot, false).unwrap(),
            [0, 0, 1, 1, 2, 2]
        );
    }

    #[test]
    fn process_mappings() {
        assert_eq!(process_mapping(&[0, 0, 0, 0]), "(vector,(0,1,4))");
        assert_eq!(process_mapping(&[0, 0, 1, 1, 2, 2]), "(vector,(0,3,2))");
        assert_eq!(process_mapping(&[0, 1, 0, 1]), "(vector,(0,2,1))");
        assert_eq!(
            process_mapping(&[0, 0, 1, 1, 2]),
            "(vector,(0,2,2),(2,1,1))"
        );
        assert_eq!(process_mapping(&[2, 2, 0]), "(vector,(0,1,2),(1,1,1))");
    }
}
