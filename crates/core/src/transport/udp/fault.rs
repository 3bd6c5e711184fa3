//! Faults injected into what the UDP transport sends, for tests only (`udp_fault`): the
//! kernel has no netem here, and loopback never loses a datagram it took.

/// Probabilities per datagram and the seed of the generator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    pub drop: f64,
    pub dup: f64,
    /// A reordered datagram goes out after the next one.
    pub reorder: f64,
    pub seed: u64,
}

impl Faults {
    /// `drop=P,dup=P,reorder=P,seed=N` (any subset, any order); empty: none.
    pub fn parse(text: &str) -> Result<Option<Faults>, String> {
        let mut f = Faults {
            drop: 0.0,
            dup: 0.0,
            reorder: 0.0,
            seed: 1,
        };
        let mut any = false;
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not NAME=VALUE"))?;
            let p = || -> Result<f64, String> {
                let p: f64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{v}' is not a probability"))?;
                if (0.0..=1.0).contains(&p) {
                    Ok(p)
                } else {
                    Err(format!("{k}={v}: a probability is between 0 and 1"))
                }
            };
            match k.trim() {
                "drop" => f.drop = p()?,
                "dup" => f.dup = p()?,
                "reorder" => f.reorder = p()?,
                "seed" => {
                    f.seed = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("seed '{v}' is not a number"))?
                }
                other => {
                    return Err(format!(
                        "unknown fault '{other}' (known: drop, dup, reorder, seed)"
                    ))
                }
            }
            any = true;
        }
        Ok(any.then_some(f))
    }
}

/// What to do with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Send,
    Drop,
    /// Send it twice.
    Duplicate,
    /// Keep it back and send it after the next one.
    Delay,
}

/// The injector: a seeded generator (SplitMix64) deciding each datagram's fate.
pub struct Injector {
    f: Faults,
    state: u64,
}

impl Injector {
    /// Each process draws its own sequence (`salt`: its gpid).
    pub fn new(f: Faults, salt: u64) -> Injector {
        Injector {
            f,
            state: f.seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    fn unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn fate(&mut self) -> Fate {
        let u = self.unit();
        if u < self.f.drop {
            Fate::Drop
        } else if u < self.f.drop + self.f.dup {
            Fate::Duplicate
        } else if u < self.f.drop + self.f.dup + self.f.reorder {
            Fate::Delay
        } else {
            Fate::Send
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_come_at_their_rates() {
        assert_eq!(Faults::parse("").unwrap(), None);
        let f = Faults::parse("drop=0.05, dup=0.01,reorder=0.01,seed=7")
            .unwrap()
            .unwrap();
        assert_eq!((f.drop, f.dup, f.reorder, f.seed), (0.05, 0.01, 0.01, 7));
        assert!(Faults::parse("drop=2").is_err());
        assert!(Faults::parse("loss=0.1").is_err());
        assert!(Faults::parse("drop").is_err());
        let mut inj = Injector::new(f, 3);
        let n = 100_000;
        let mut counts = [0u32; 4];
        for _ in 0..n {
            counts[inj.fate() as usize] += 1;
        }
        let rate = |c: u32| c as f64 / n as f64;
        assert!((rate(counts[Fate::Drop as usize]) - 0.05).abs() < 0.005);
        assert!((rate(counts[Fate::Duplicate as usize]) - 0.01).abs() < 0.003);
        assert!((rate(counts[Fate::Delay as usize]) - 0.01).abs() < 0.003);
    }
}
