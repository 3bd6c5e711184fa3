//! `protean-prof report`: one self-contained HTML page about the profiles of a run, to open in
//! a browser.
//!
//! - per phase, a heat map of PRO-MPI's priority matrix p[i][j][k] (messages process j sent to
//!   process i in phase k: the traffic a channel of i's would carry), with the cells the
//!   schedule gives a channel outlined;
//! - the channel assignments over time: per process and phase, how many channels it holds and
//!   how many it took up or gave back at the phase boundary;
//! - per phase, the share of messages that travel through fast channels as the schedule
//!   assigns them, beside the static rule (every peer a channel when they fit in `max_fast`,
//!   otherwise none).
//!
//! The plots are SVG written here: they are rectangles, lines and labels, and a plotting
//! library's layout needs a font backend for measuring text (font-kit and the system's fonts,
//! or a bundled font) that this page does not.

use std::fmt::Write;

use protean_core::ids::Gpid;
use protean_core::proto::channels::{Profile, Schedule};

/// What a report shows, computed from the profiles and a schedule.
pub struct Report {
    pub size: usize,
    pub phases: usize,
    /// `matrix[k][i][j]`: messages j sent to i in phase k.
    pub matrix: Vec<Vec<Vec<u64>>>,
    /// `bytes[k]`: bytes sent in phase k by all processes.
    pub bytes: Vec<u64>,
    /// `channels[i][k]`: the peers process i gives a channel in phase k.
    pub channels: Vec<Vec<Vec<Gpid>>>,
    /// Per phase: (messages in all, through the schedule's channels, through the static rule's).
    pub share: Vec<(u64, u64, u64)>,
    pub max_fast: usize,
    pub profiles: usize,
}

impl Report {
    pub fn new(profiles: &[Profile], sched: &Schedule, max_fast: usize) -> Result<Report, String> {
        let size = profiles.first().ok_or("no profiles")?.size as usize;
        if profiles.iter().any(|p| p.size as usize != size) {
            return Err("the profiles come from runs of different sizes".into());
        }
        let phases = profiles.iter().map(|p| p.phases.len()).max().unwrap_or(0);
        let mut matrix = vec![vec![vec![0u64; size]; size]; phases];
        let mut bytes = vec![0u64; phases];
        for p in profiles {
            let j = p.rank.idx();
            if j >= size {
                return Err(format!("rank {j} in a run of {size}"));
            }
            for (k, ph) in p.phases.iter().enumerate() {
                for &(to, m, b) in ph {
                    if to.idx() >= size {
                        return Err(format!("rank {j} sent to {to} in a run of {size}"));
                    }
                    matrix[k][to.idx()][j] += m;
                    bytes[k] += b;
                }
            }
        }
        let channels: Vec<Vec<Vec<Gpid>>> = (0..size)
            .map(|i| {
                (0..phases)
                    .map(|k| {
                        sched
                            .peers_for(Gpid::new(i as u32), size as u32, k)
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .collect();
        let static_all = size.saturating_sub(1) <= max_fast;
        let share = (0..phases)
            .map(|k| {
                let mut total = 0;
                let mut sched_fast = 0;
                for (i, row) in matrix[k].iter().enumerate() {
                    for (j, &m) in row.iter().enumerate() {
                        total += m;
                        if channels[i][k].contains(&Gpid::from_idx(j)) {
                            sched_fast += m;
                        }
                    }
                }
                (total, sched_fast, if static_all { total } else { 0 })
            })
            .collect();
        Ok(Report {
            size,
            phases,
            matrix,
            bytes,
            channels,
            share,
            max_fast,
            profiles: profiles.len(),
        })
    }

    /// Channels taken up and given back by process `i` at the boundary into phase `k`.
    fn changes(&self, i: usize, k: usize) -> (usize, usize) {
        if k == 0 {
            return (self.channels[i][0].len(), 0);
        }
        let (a, b) = (&self.channels[i][k - 1], &self.channels[i][k]);
        let up = b.iter().filter(|p| !a.contains(p)).count();
        let down = a.iter().filter(|p| !b.contains(p)).count();
        (up, down)
    }

    /// The page.
    pub fn html(&self, title: &str) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\n\
             body{{font-family:sans-serif;margin:2em;max-width:75em}}\n\
             table{{border-collapse:collapse}} td,th{{border:1px solid #bbb;padding:0.2em 0.6em;text-align:right}}\n\
             .maps{{display:flex;flex-wrap:wrap;gap:1.5em}} figure{{margin:0}}\n\
             </style></head><body>\n<h1>{t}</h1>\n",
            t = escape(title)
        );
        let (all, fast, stat) = self
            .share
            .iter()
            .fold((0, 0, 0), |a, x| (a.0 + x.0, a.1 + x.1, a.2 + x.2));
        let _ = writeln!(
            s,
            "<p>{} profiles of a run of {} processes, {} phases; at most {} fast channels per \
             process. Messages through fast channels, as the schedule assigns them: <b>{}</b> of \
             {all} ({}); under the static rule: {} ({}).</p>",
            self.profiles,
            self.size,
            self.phases,
            self.max_fast,
            fast,
            pct(fast, all),
            stat,
            pct(stat, all),
        );
        s.push_str("<h2>Share of messages on fast channels, per phase</h2>\n");
        s.push_str(&self.share_svg());
        s.push_str(
            "<table><tr><th>phase</th><th>messages</th><th>bytes</th><th>on the schedule's \
             channels</th><th>on the static rule's</th><th>channels taken up</th><th>given \
             back</th></tr>\n",
        );
        for k in 0..self.phases {
            let (t, f, st) = self.share[k];
            let (up, down) = (0..self.size).fold((0, 0), |a, i| {
                let c = self.changes(i, k);
                (a.0 + c.0, a.1 + c.1)
            });
            let _ = writeln!(
                s,
                "<tr><td>{k}</td><td>{t}</td><td>{}</td><td>{}</td><td>{}</td><td>{up}</td><td>{down}</td></tr>",
                self.bytes[k],
                pct(f, t),
                pct(st, t)
            );
        }
        s.push_str("</table>\n");
        s.push_str(
            "<h2>Channel assignments over time</h2>\n<p>Per process (rows) and phase (columns): \
             the channels it holds; a green bar on a cell's left edge for channels taken up at \
             the phase boundary, a red bar for channels given back.</p>\n",
        );
        s.push_str(&self.assign_svg());
        s.push_str(
            "<h2>Priority matrix per phase</h2>\n<p>Row i, column j: messages process j sent to \
             process i in the phase (what a channel of i's would carry); darker is more, on a \
             logarithmic scale. Outlined cells are the peers the schedule gives a channel.</p>\n\
             <div class=\"maps\">\n",
        );
        for k in 0..self.phases {
            let _ = writeln!(
                s,
                "<figure>{}<figcaption>phase {k}</figcaption></figure>",
                self.heat_svg(k)
            );
        }
        s.push_str("</div>\n</body></html>\n");
        s
    }

    /// Heat map of phase `k`.
    pub fn heat_svg(&self, k: usize) -> String {
        let n = self.size;
        let cell = (360 / n.max(1)).clamp(3, 24);
        let pad = 34;
        let w = pad + n * cell + 4;
        let max = self.matrix[k].iter().flatten().copied().max().unwrap_or(0);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{w}\" \
             class=\"heat\" data-phase=\"{k}\">\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"{pad}\" y=\"11\" font-size=\"11\">sender j &#8594;</text>\
             <text x=\"4\" y=\"{pad}\" font-size=\"11\" transform=\"rotate(90 4 {pad})\">receiver i &#8594;</text>"
        );
        for i in (0..n).step_by(label_step(n, cell)) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" font-size=\"8\" text-anchor=\"end\">{i}</text>\
                 <text x=\"{}\" y=\"{}\" font-size=\"8\">{i}</text>",
                pad - 2,
                pad + i * cell + cell.min(8),
                pad + i * cell + 1,
                pad - 2
            );
        }
        for i in 0..n {
            for j in 0..n {
                let m = self.matrix[k][i][j];
                let x = pad + j * cell;
                let y = pad + i * cell;
                let fill = shade(m, max);
                let _ = write!(
                    s,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{cell}\" height=\"{cell}\" fill=\"{fill}\"><title>{j} to {i}: {m} messages</title></rect>"
                );
                if self.channels[i][k].contains(&Gpid::from_idx(j)) {
                    let _ = write!(
                        s,
                        "<rect class=\"chan\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>",
                        x + 1,
                        y + 1,
                        cell.saturating_sub(2).max(1),
                        cell.saturating_sub(2).max(1)
                    );
                }
            }
            s.push('\n');
        }
        s.push_str("</svg>");
        s
    }

    /// Channels held per process and phase, with the changes at each boundary.
    fn assign_svg(&self) -> String {
        let (n, p) = (self.size, self.phases);
        let cw = (720 / p.max(1)).clamp(6, 40);
        let ch = (360 / n.max(1)).clamp(4, 20);
        let pad = 40;
        let most = self.max_fast.max(1);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" class=\"assign\">\n",
            pad + p * cw + 4,
            pad + n * ch + 4
        );
        let _ = writeln!(
            s,
            "<text x=\"{pad}\" y=\"14\" font-size=\"11\">phase &#8594;</text>\
             <text x=\"2\" y=\"{}\" font-size=\"11\">rank</text>",
            pad - 4
        );
        for k in (0..p).step_by(label_step(p, cw)) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" font-size=\"9\">{k}</text>",
                pad + k * cw + 1,
                pad - 3
            );
        }
        for i in (0..n).step_by(label_step(n, ch)) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"end\">{i}</text>",
                pad - 3,
                pad + i * ch + ch.min(10)
            );
        }
        for i in 0..n {
            for k in 0..p {
                let held = self.channels[i][k].len();
                let (up, down) = self.changes(i, k);
                let (x, y) = (pad + k * cw, pad + i * ch);
                let _ = write!(
                    s,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{cw}\" height=\"{ch}\" fill=\"{}\" stroke=\"#fff\"><title>rank {i}, phase {k}: {held} channels ({}), {up} taken up, {down} given back</title></rect>",
                    shade(held as u64, most as u64),
                    self.channels[i][k]
                        .iter()
                        .map(|g| g.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if up > 0 {
                    let _ = write!(
                        s,
                        "<rect x=\"{x}\" y=\"{y}\" width=\"2\" height=\"{}\" fill=\"#2ca02c\"/>",
                        (ch / 2).max(1)
                    );
                }
                if down > 0 {
                    let _ = write!(
                        s,
                        "<rect x=\"{x}\" y=\"{}\" width=\"2\" height=\"{}\" fill=\"#d62728\"/>",
                        y + ch / 2,
                        (ch / 2).max(1)
                    );
                }
            }
            s.push('\n');
        }
        s.push_str("</svg>\n");
        s
    }

    /// Bars per phase: the schedule's share and the static rule's.
    fn share_svg(&self) -> String {
        let p = self.phases.max(1);
        let bw = (720 / p).clamp(6, 40);
        let (h, pad) = (160, 30);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" class=\"share\">\n",
            pad + p * bw + 120,
            h + 2 * pad
        );
        let _ = writeln!(
            s,
            "<line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"#000\"/>\
             <text x=\"0\" y=\"{}\" font-size=\"10\">100%</text><text x=\"8\" y=\"{}\" font-size=\"10\">0%</text>",
            pad + h,
            pad + 4,
            pad + h
        );
        for (k, &(t, f, st)) in self.share.iter().enumerate() {
            let x = pad + k * bw + 1;
            let hf = (f * h as u64).checked_div(t).unwrap_or(0) as usize;
            let hs = (st * h as u64).checked_div(t).unwrap_or(0) as usize;
            let half = (bw / 2).saturating_sub(1).max(1);
            let _ = write!(
                s,
                "<rect x=\"{x}\" y=\"{}\" width=\"{half}\" height=\"{hf}\" fill=\"#1f77b4\"><title>phase {k}: schedule {}</title></rect>\
                 <rect x=\"{}\" y=\"{}\" width=\"{half}\" height=\"{hs}\" fill=\"#ff7f0e\"><title>phase {k}: static rule {}</title></rect>",
                pad + h - hf,
                pct(f, t),
                x + half,
                pad + h - hs,
                pct(st, t)
            );
        }
        for k in (0..p).step_by(label_step(p, bw)) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" font-size=\"9\">{k}</text>",
                pad + k * bw + 2,
                pad + h + 12
            );
        }
        let lx = pad + p * bw + 10;
        let _ = writeln!(
            s,
            "\n<rect x=\"{lx}\" y=\"{pad}\" width=\"10\" height=\"10\" fill=\"#1f77b4\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">schedule</text>\
             <rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#ff7f0e\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">static rule</text>",
            lx + 14,
            pad + 9,
            pad + 16,
            lx + 14,
            pad + 25
        );
        s.push_str("</svg>\n");
        s
    }
}

/// Every how many of `n` items, `cell` pixels apart, a label fits.
fn label_step(n: usize, cell: usize) -> usize {
    let per = (24 / cell.max(1)).max(1);
    if n <= 1 {
        1
    } else {
        per
    }
}

/// `a` of `b` as a percentage.
fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

/// White for 0, darker blue for more, on a logarithmic scale up to `max`.
fn shade(v: u64, max: u64) -> String {
    if v == 0 || max == 0 {
        return "#ffffff".into();
    }
    let t = ((v as f64).ln_1p() / (max as f64).ln_1p()).clamp(0.0, 1.0);
    let c = |lo: f64, hi: f64| (lo + (hi - lo) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        c(222.0, 8.0),
        c(235.0, 48.0),
        c(247.0, 107.0)
    )
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four processes; in phase 0 each sends 10 messages to its right neighbour, in phase 1
    /// 5 to its left one.
    fn ring() -> Vec<Profile> {
        (0..4u32)
            .map(|r| Profile {
                rank: Gpid::new(r),
                size: 4,
                phases: vec![
                    vec![(Gpid::new((r + 1) % 4), 10, 1000)],
                    vec![(Gpid::new((r + 3) % 4), 5, 80)],
                ],
            })
            .collect()
    }

    #[test]
    fn matrix_assignments_and_shares() {
        let p = ring();
        let sched = Schedule::analyze(&p, 1, 0.0).unwrap();
        let r = Report::new(&p, &sched, 1).unwrap();
        assert_eq!((r.size, r.phases), (4, 2));
        // Process 1 receives from 0 in phase 0 and from 2 in phase 1.
        assert_eq!(r.matrix[0][1][0], 10);
        assert_eq!(r.matrix[1][1][2], 5);
        assert_eq!(r.channels[1], vec![vec![Gpid::new(0)], vec![Gpid::new(2)]]);
        // Every message goes through a scheduled channel; the static rule (3 peers, 1
        // channel) gives none.
        assert_eq!(r.share, vec![(40, 40, 0), (20, 20, 0)]);
        assert_eq!(r.bytes, vec![4000, 320]);
        // Each process takes one channel up at phase 0, and swaps it at phase 1.
        assert_eq!(r.changes(1, 0), (1, 0));
        assert_eq!(r.changes(1, 1), (1, 1));
    }

    #[test]
    fn html_has_one_heat_map_per_phase_with_outlined_channels() {
        let p = ring();
        let sched = Schedule::analyze(&p, 1, 0.0).unwrap();
        let r = Report::new(&p, &sched, 1).unwrap();
        let h = r.html("run <1>");
        assert!(h.contains("<title>run &lt;1&gt;</title>"));
        assert_eq!(h.matches("class=\"heat\"").count(), 2);
        // One outlined cell per process and phase.
        assert_eq!(h.matches("class=\"chan\"").count(), 8);
        assert!(h.contains("0 to 1: 10 messages"));
        assert!(h.contains("<b>60</b> of 60 (100.0%)"));
        assert!(h.contains("under the static rule: 0 (0.0%)"));
    }

    #[test]
    fn static_rule_covers_everything_when_peers_fit() {
        let p = ring();
        let sched = Schedule::analyze(&p, 8, 0.0).unwrap();
        let r = Report::new(&p, &sched, 8).unwrap();
        assert_eq!(r.share, vec![(40, 40, 40), (20, 20, 20)]);
    }

    #[test]
    fn mixed_sizes_are_refused() {
        let mut p = ring();
        p[2].size = 5;
        let sched = Schedule::default();
        assert!(Report::new(&p, &sched, 1).is_err());
    }

    #[test]
    fn shades() {
        assert_eq!(shade(0, 9), "#ffffff");
        assert_eq!(shade(9, 9), "#08306b");
    }
}
